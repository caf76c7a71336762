//! The guide (`docs/`, built as an mdBook) as doc tests: each page listed in
//! `docs/SUMMARY.md` is a module whose documentation is the page, so `cargo test --doc`
//! compiles every ```rust snippet of the book and runs those not marked `no_run` (a
//! snippet that needs a provider's key or the network says so on its page). Lines that
//! start with `# ` are hidden by both rustdoc and mdbook. `cargo xtask book` checks that
//! this list and the book's table of contents agree; `tests/catalog_examples.rs` loads
//! every catalog the book shows.

macro_rules! pages {
    ($($module:ident => $path:literal,)*) => {
        $(
            #[doc = include_str!(concat!("../../../docs/", $path))]
            // The pages are written for mdbook, whose Markdown accepts a list item's
            // continuation lines unindented.
            #[allow(clippy::doc_lazy_continuation)]
            pub mod $module {}
        )*

        /// Every page of the book included above, as its path under `docs/`.
        pub const PAGES: &[&str] = &[$($path),*];
    };
}

pages! {
    introduction => "introduction.md",
    getting_started => "getting-started.md",
    concepts => "concepts.md",
    catalog => "catalog.md",
    credentials => "credentials.md",
    rate_limiting => "rate-limiting.md",
    distributed => "distributed.md",
    failures => "failures.md",
    provider_anthropic => "providers/anthropic.md",
    provider_openai => "providers/openai.md",
    provider_bedrock => "providers/bedrock.md",
    provider_gemini => "providers/gemini.md",
    provider_anthropic_vertex => "providers/anthropic-vertex.md",
    provider_cohere => "providers/cohere.md",
    provider_openai_like => "providers/openai-like.md",
    provider_mistral => "providers/mistral.md",
    provider_groq => "providers/groq.md",
    provider_xai => "providers/xai.md",
    provider_together => "providers/together.md",
    provider_perplexity => "providers/perplexity.md",
    provider_deepseek => "providers/deepseek.md",
    provider_azure_openai => "providers/azure-openai.md",
    writing_a_provider => "providers.md",
    cli => "cli.md",
    gateway => "gateway.md",
    observability => "observability.md",
    benchmarks => "benchmarks.md",
    reliability => "reliability.md",
}
