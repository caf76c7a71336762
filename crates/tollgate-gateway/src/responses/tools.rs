//! The tools of a Responses request, as the neutral request takes them: `function`,
//! `custom` (one string argument), `namespace` groups flattened (a clashing name qualified
//! by its namespace, [`Namespaced`]), and OpenAI's built-in tools carried as native; and
//! the request's `tool_choice`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use tollgate::{Json, NativeTool, ToolChoice, ToolDefinition};

use super::fields::{bad, kind_of, str_field};
use crate::error::GatewayError;

/// The argument a custom tool's freeform input travels in, as a function argument.
pub(crate) const CUSTOM_INPUT: &str = "input";

/// A tool declared in a `namespace` group: the group's name and the tool's own. The model
/// knows it by that name, or by `{namespace}__{name}` when another tool of the request
/// has the same name (two MCP servers' `search`), so no two tools share a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Namespaced {
    /// The `namespace` group's name.
    pub(crate) namespace: String,
    /// The tool's name in its group, as the client declared it.
    pub(crate) name: String,
}

impl Namespaced {
    /// The name a tool of `namespace` called `name` goes to the model under, when its
    /// own name is taken.
    pub(super) fn qualified(namespace: &str, name: &str) -> String {
        format!("{namespace}__{name}")
    }
}

/// The request's tools, as the neutral request takes them.
#[derive(Debug, Default)]
pub(super) struct Tools {
    pub(super) tools: Vec<ToolDefinition>,
    pub(super) custom: BTreeSet<String>,
    pub(super) namespaces: BTreeMap<String, Namespaced>,
}

/// A `function` tool.
fn function(tool: &Value, path: &str) -> Result<ToolDefinition, GatewayError> {
    let name = str_field(tool, "name", path)?;
    let description = tool.get("description").and_then(Value::as_str);
    let schema = match tool.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(s) => s.clone(),
    };
    let strict = tool.get("strict").and_then(Value::as_bool);
    let defer = tool.get("defer_loading").and_then(Value::as_bool) == Some(true);
    Ok(
        ToolDefinition::new(name, description.unwrap_or(""), Json::new(schema))
            .with_strict(strict)
            .with_defer_loading(defer),
    )
}

/// A `custom` tool: a function of one string argument, [`CUSTOM_INPUT`], its grammar in
/// the description.
fn custom(tool: &Value, path: &str) -> Result<ToolDefinition, GatewayError> {
    let name = str_field(tool, "name", path)?;
    let mut description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if let Some(format) = tool.get("format").filter(|f| f["type"] == "grammar") {
        let syntax = format["syntax"].as_str().unwrap_or("grammar");
        let definition = format["definition"].as_str().unwrap_or("");
        description.push_str(&format!(
            "\n\nThe `{CUSTOM_INPUT}` argument must match this {syntax} grammar:\n{definition}"
        ));
    }
    let schema = json!({
        "type": "object",
        "properties": {CUSTOM_INPUT: {"type": "string"}},
        "required": [CUSTOM_INPUT],
        "additionalProperties": false,
    });
    Ok(ToolDefinition::new(name, description, Json::new(schema)))
}

/// The tools: `function`, `custom`, and `namespace` groups of them (the client's own
/// tools, flattened; a namespaced tool whose name another tool also has is qualified by
/// its namespace, [`Namespaced`]); a built-in tool (`web_search`, `file_search`, …) is OpenAI's own,
/// carried as a native tool that only an OpenAI Responses upstream takes (every other
/// provider refuses it by type).
pub(super) fn tools(tools: Option<&Value>) -> Result<Tools, GatewayError> {
    let mut out = Tools::default();
    let list = match tools {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(bad(format!(
                "`tools` must be a list, not {}",
                kind_of(other)
            )));
        }
    };
    // How many tools of the request have each name, namespaced or not.
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for tool in list {
        let members = match tool.get("type").and_then(Value::as_str) {
            Some("namespace") => tool.get("tools").and_then(Value::as_array),
            _ => None,
        };
        let named = members.map_or_else(|| vec![tool], |m| m.iter().collect());
        for t in named {
            if let Some(name) = t.get("name").and_then(Value::as_str) {
                *names.entry(name).or_default() += 1;
            }
        }
    }
    for (i, tool) in list.iter().enumerate() {
        let path = format!("tools[{i}]");
        match tool.get("type").and_then(Value::as_str).unwrap_or("") {
            "function" => out.tools.push(function(tool, &path)?),
            "custom" => {
                let tool = custom(tool, &path)?;
                out.custom.insert(tool.name.clone());
                out.tools.push(tool);
            }
            "namespace" => {
                let namespace = str_field(tool, "name", &path)?;
                let inner = tool.get("tools").and_then(Value::as_array);
                for (j, member) in inner.into_iter().flatten().enumerate() {
                    let path = format!("{path}.tools[{j}]");
                    let is_custom = member.get("type").and_then(Value::as_str) == Some("custom");
                    let mut member = if is_custom {
                        custom(member, &path)?
                    } else {
                        function(member, &path)?
                    };
                    let own = member.name.clone();
                    if names.get(own.as_str()).is_some_and(|&n| n > 1) {
                        member.name = Namespaced::qualified(namespace, &own);
                    }
                    if is_custom {
                        out.custom.insert(member.name.clone());
                    }
                    let namespaced = Namespaced {
                        namespace: namespace.to_owned(),
                        name: own,
                    };
                    out.namespaces.insert(member.name.clone(), namespaced);
                    out.tools.push(member);
                }
            }
            "" => return Err(bad(format!("`{path}.type` is required"))),
            builtin => {
                // A name of its own, unique in the request (two `mcp` servers, a built-in
                // beside a function of its type's name): the definition is what is sent.
                let base = tool
                    .get("name")
                    .or_else(|| tool.get("server_label"))
                    .and_then(Value::as_str)
                    .unwrap_or(builtin);
                let taken = |n: &str| out.tools.iter().any(|t| t.name == n);
                let name = if taken(base) {
                    format!("{base}_{i}")
                } else {
                    base.to_owned()
                };
                let mut native = ToolDefinition::new(name, "", Json::new(json!({})));
                native.native = Some(NativeTool {
                    provider: "openai".into(),
                    definition: Json::new(tool.clone()),
                });
                out.tools.push(native);
            }
        }
    }
    Ok(out)
}

/// Responses' `tool_choice`: `auto`, `none`, `required`, `{"type": "function", "name"}`
/// or `{"type": "custom", "name"}`.
pub(super) fn tool_choice(value: &Value) -> Result<ToolChoice, GatewayError> {
    let named = value
        .get("name")
        .and_then(Value::as_str)
        .filter(|_| matches!(value["type"].as_str(), Some("function" | "custom")));
    match (value.as_str(), named) {
        (Some("auto"), _) => Ok(ToolChoice::Auto),
        (Some("none"), _) => Ok(ToolChoice::None),
        (Some("required"), _) => Ok(ToolChoice::Required),
        (_, Some(name)) => Ok(ToolChoice::Tool(name.to_owned())),
        _ => Err(bad(format!(
            "tool_choice {value} is not one of \"auto\", \"none\", \"required\", \
             {{\"type\": \"function\", \"name\": …}} or {{\"type\": \"custom\", \"name\": …}} \
             (allowed_tools and built-in tools are not served by the gateway)"
        ))),
    }
}
