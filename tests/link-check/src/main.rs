//! Lists the provider keys registered in this binary, one per line, each with the crate
//! that registered it and whether its models need a credential (as the catalog sees them).
//!
//! It depends on provider crates only, and links each with the documented one-liner.
//! If the linker dropped a provider's registration, its key would be missing here; if the
//! registry and the catalog disagreed on what is linked, it fails.

use tollgate_anthropic as _;
use tollgate_azure as _;
use tollgate_bedrock as _;
use tollgate_cohere as _;
use tollgate_deepseek as _;
use tollgate_fake as _;
use tollgate_gemini as _;
use tollgate_groq as _;
use tollgate_mistral as _;
use tollgate_ollama as _;
use tollgate_openai as _;
use tollgate_perplexity as _;
use tollgate_together as _;
use tollgate_xai as _;

fn main() {
    let registry = match tollgate_fake::tollgate::provider::ProviderRegistry::linked() {
        Ok(registry) => registry,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let known = tollgate_fake::tollgate::catalog::KnownProviders::linked();
    for key in registry.keys() {
        let (Some(krate), Some(credential)) =
            (known.crate_name(key), known.requires_credential(key))
        else {
            eprintln!("`{key}` is in the registry but the catalog does not know it");
            std::process::exit(1);
        };
        let credential = if credential {
            "credential"
        } else {
            "no-credential"
        };
        println!("{key} {krate} {credential}");
    }
}
