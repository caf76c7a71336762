//! What the `sim` provider's request-level tests share: a model `m` that answers five
//! words at once whatever the client's `max_tokens`, and tool definitions.

use tollgate::{Catalog, Json, Models, ToolDefinition};
use tollgate_sim as _;

/// Models with the one sim model `m` (five output tokens, 10 ms to answer, a 128000
/// output ceiling as a client's default `max_tokens` asks).
pub(crate) fn models() -> Models {
    let catalog = Catalog::from_toml_str(
        r#"
        [models.m]
        provider = "sim"
        max_output_tokens = 128000
        default_output_tokens = 64
        [models.m.options]
        latency_ms = 10
        output_tokens = 5
        "#,
    )
    .unwrap();
    Models::builder().catalog(catalog).build().unwrap()
}

/// A tool `name` taking arguments of `schema`.
pub(crate) fn tool(name: &str, schema: serde_json::Value) -> ToolDefinition {
    ToolDefinition {
        defer_loading: false,
        cache: None,
        name: name.into(),
        description: format!("The {name} tool"),
        input_schema: Json::new(schema),
        strict: None,
        native: None,
    }
}
