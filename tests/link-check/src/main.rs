//! Lists the provider keys registered in this binary, one per line.
//!
//! It depends on provider crates only, and links each with the documented one-liner.
//! If the linker dropped a provider's registration, its key would be missing here.

use tollgate_anthropic as _;
use tollgate_bedrock as _;
use tollgate_fake as _;
use tollgate_openai as _;

fn main() {
    let registry = match tollgate_fake::tollgate::provider::ProviderRegistry::linked() {
        Ok(registry) => registry,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    for key in registry.keys() {
        println!("{key}");
    }
}
