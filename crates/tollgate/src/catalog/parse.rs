//! TOML → model entries, with errors that name the model and the field.
//!
//! Parsed by hand from a `toml::Table` rather than by serde derive, so that every
//! mistake (a negative limit, a string where a number belongs, a misspelt field) is
//! reported with the model id and the field's name.

use super::batch_terms::BatchTerms;
use super::entry::{Deployment, EmbeddingCapabilities, Limits, ModelEntry, ModelKind, RateWindow};
use super::price::Price;
use super::{CatalogError, FallbackWait};
use toml::{Table, Value};

const MODEL_FIELDS: &[&str] = &[
    "provider",
    "name",
    "aliases",
    "patterns",
    "kind",
    "credential",
    "credentials",
    "deployments",
    "rpm",
    "tpm",
    "input_tpm",
    "output_tpm",
    "burst_seconds",
    "arrival_allowance_ms",
    "window",
    "max_output_tokens",
    "default_output_tokens",
    "context_window",
    "stream_idle_timeout_secs",
    "max_response_bytes",
    "fallbacks",
    "fallback_wait",
    "price",
    "batch",
    "native_width",
    "dimensions_param",
    "truncation_safe",
    "options",
];

const DEPLOYMENT_FIELDS: &[&str] = &["name", "credential", "options"];

const BATCH_FIELDS: &[&str] = &[
    "price",
    "queue_tokens",
    "max_batches",
    "max_requests",
    "max_bytes",
];

const PRICE_FIELDS: &[&str] = &[
    "input",
    "output",
    "cache_read",
    "cache_write",
    "cache_write_1h",
];

pub(super) fn parse_catalog(text: &str) -> Result<(Vec<ModelEntry>, Option<u64>), CatalogError> {
    if let Some(model_id) = duplicate_model_header(text) {
        return Err(CatalogError::DuplicateModel { model_id });
    }
    let root: Table = text
        .parse()
        .map_err(|e: toml::de::Error| CatalogError::Syntax {
            message: e.to_string(),
        })?;
    let mut width = None;
    let mut models = Vec::new();
    for (key, value) in &root {
        match key.as_str() {
            "embeddings" => width = parse_embeddings(value)?,
            "models" => {
                let Value::Table(table) = value else {
                    return Err(section(
                        "models",
                        "must be a table of `[models.ID]` entries",
                    ));
                };
                for (id, model) in table {
                    models.push(parse_model(id, model)?);
                }
            }
            other => {
                return Err(section(
                    other,
                    "is not a catalog section; expected `[models.ID]` or `[embeddings]`",
                ));
            }
        }
    }
    Ok((models, width))
}

fn section(field: &str, reason: &str) -> CatalogError {
    CatalogError::InvalidSection {
        field: field.into(),
        reason: reason.into(),
    }
}

fn parse_embeddings(value: &Value) -> Result<Option<u64>, CatalogError> {
    let Value::Table(table) = value else {
        return Err(section("embeddings", "must be a table with `width`"));
    };
    let mut width = None;
    for (key, value) in table {
        match key.as_str() {
            "width" => {
                width = Some(
                    whole_number(value).map_err(|reason| section("embeddings.width", &reason))?,
                );
            }
            other => {
                return Err(section(
                    &format!("embeddings.{other}"),
                    "is not a known field; expected `width`",
                ));
            }
        }
    }
    Ok(width)
}

/// Finds a `[models.ID]` header that appears twice. TOML rejects the file too, but its
/// message does not say it is a duplicate model; this one does.
fn duplicate_model_header(text: &str) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix('[').filter(|_| !line.starts_with("[[")) else {
            continue;
        };
        let Some(inner) = rest.split(']').next() else {
            continue;
        };
        let parts = split_dotted_key(inner.trim());
        if parts.len() == 2 && parts[0] == "models" && !seen.insert(parts[1].clone()) {
            return Some(parts[1].clone());
        }
    }
    None
}

/// Splits a dotted TOML key into its parts, honouring quoted parts.
fn split_dotted_key(key: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    for c in key.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => quote = Some(c),
            (None, '.') => parts.push(std::mem::take(&mut current).trim().to_owned()),
            (None, c) => current.push(c),
        }
    }
    parts.push(current.trim().to_owned());
    parts
}

fn whole_number(value: &Value) -> Result<u64, String> {
    match value {
        Value::Integer(n) if *n >= 0 => Ok(*n as u64),
        Value::Integer(n) => Err(format!(
            "must not be negative, got {n} (use 0 for unlimited where allowed)"
        )),
        Value::Float(f) => Err(format!("must be a whole number, got {f}")),
        other => Err(format!(
            "must be a whole number, got {} {other}",
            other.type_str()
        )),
    }
}

fn number(value: &Value) -> Result<f64, String> {
    match value {
        Value::Integer(n) if *n >= 0 => Ok(*n as f64),
        Value::Float(f) if f.is_finite() && *f >= 0.0 => Ok(*f),
        Value::Integer(_) | Value::Float(_) => {
            Err(format!("must be a finite number, 0 or more, got {value}"))
        }
        other => Err(format!(
            "must be a number, got {} {other}",
            other.type_str()
        )),
    }
}

fn parse_model(id: &str, value: &Value) -> Result<ModelEntry, CatalogError> {
    let invalid = |field: &str, reason: String| CatalogError::InvalidField {
        model_id: id.to_owned(),
        field: field.to_owned(),
        reason,
    };
    let Value::Table(table) = value else {
        return Err(invalid("models", "must be a table".into()));
    };
    for key in table.keys() {
        if !MODEL_FIELDS.contains(&key.as_str()) {
            return Err(invalid(
                key,
                format!(
                    "is not a known field; known fields: {}",
                    MODEL_FIELDS.join(", ")
                ),
            ));
        }
    }
    let string = |field: &str| -> Result<Option<String>, CatalogError> {
        match table.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(invalid(
                field,
                format!("must be a string, got {} {other}", other.type_str()),
            )),
        }
    };
    let count = |field: &str| -> Result<Option<u64>, CatalogError> {
        table
            .get(field)
            .map(whole_number)
            .transpose()
            .map_err(|reason| invalid(field, reason))
    };
    let flag = |field: &str| -> Result<bool, CatalogError> {
        match table.get(field) {
            None => Ok(false),
            Some(Value::Boolean(b)) => Ok(*b),
            Some(other) => Err(invalid(
                field,
                format!("must be true or false, got {other}"),
            )),
        }
    };

    let provider = string("provider")?
        .ok_or_else(|| invalid("provider", "is required: the provider key".into()))?;
    let kind = match string("kind")?.as_deref() {
        None | Some("chat") => ModelKind::Chat,
        Some("embeddings") => ModelKind::Embeddings,
        Some("decision") => ModelKind::Decision,
        Some(other) => {
            return Err(invalid(
                "kind",
                format!("must be `chat`, `embeddings` or `decision`, got `{other}`"),
            ));
        }
    };
    let window = match string("window")?.as_deref() {
        None | Some("continuous") => RateWindow::Continuous,
        Some("fixed") => RateWindow::Fixed,
        Some(other) => {
            return Err(invalid(
                "window",
                format!(
                    "must be `continuous` (a token bucket, the default) or `fixed` (windows \
                     that refill all at once at the reset), got `{other}`"
                ),
            ));
        }
    };
    let strings = |field: &str, what: &str| -> Result<Vec<String>, CatalogError> {
        match table.get(field) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(invalid(
                        field,
                        format!("must list {what} as strings, got {other}"),
                    )),
                })
                .collect(),
            Some(other) => Err(invalid(
                field,
                format!("must be an array of {what}, got {other}"),
            )),
        }
    };
    let fallbacks = strings("fallbacks", "model ids")?;
    let aliases = strings("aliases", "names")?;
    let patterns = strings("patterns", "globs with one `*`")?;
    let fallback_wait = match string("fallback_wait")?.as_deref() {
        None => FallbackWait::default(),
        Some(text) => FallbackWait::from_catalog(text).ok_or_else(|| {
            invalid(
                "fallback_wait",
                format!(
                    "must be `soonest` (the candidate that could serve soonest waits, the \
                     default) or `last` (only the last remaining candidate waits), got `{text}`"
                ),
            )
        })?,
    };
    let price = table
        .get("price")
        .map(|p| parse_price(p, "price", &invalid))
        .transpose()?;
    let batch = match table.get("batch") {
        None => BatchTerms::default(),
        Some(Value::Table(b)) => {
            for key in b.keys() {
                if !BATCH_FIELDS.contains(&key.as_str()) {
                    return Err(invalid(
                        &format!("batch.{key}"),
                        format!("is not a known field; known: {}", BATCH_FIELDS.join(", ")),
                    ));
                }
            }
            let count = |field: &str| -> Result<Option<u64>, CatalogError> {
                b.get(field)
                    .map(whole_number)
                    .transpose()
                    .map_err(|r| invalid(&format!("batch.{field}"), r))
            };
            BatchTerms {
                price: b
                    .get("price")
                    .map(|p| parse_price(p, "batch.price", &invalid))
                    .transpose()?,
                queue_tokens: count("queue_tokens")?,
                max_batches: count("max_batches")?,
                max_requests: count("max_requests")?,
                max_bytes: count("max_bytes")?,
            }
        }
        Some(other) => {
            return Err(invalid(
                "batch",
                format!(
                    "must be a table (`price`, `queue_tokens`, `max_batches`, `max_requests`, \
                     `max_bytes`), got {other}"
                ),
            ));
        }
    };
    let options = match table.get("options") {
        None => Table::new(),
        Some(Value::Table(t)) => t.clone(),
        Some(other) => return Err(invalid("options", format!("must be a table, got {other}"))),
    };
    let deployments = parse_deployments(table, &invalid)?;
    let embedding = EmbeddingCapabilities {
        native_width: count("native_width")?,
        dimensions_param: flag("dimensions_param")?,
        truncation_safe: flag("truncation_safe")?,
    };
    Ok(ModelEntry {
        id: id.to_owned(),
        aliases,
        patterns,
        name: string("name")?.unwrap_or_else(|| id.to_owned()),
        provider,
        kind,
        credential: string("credential")?,
        limits: Limits {
            rpm: count("rpm")?.unwrap_or(0),
            tpm: count("tpm")?.unwrap_or(0),
            input_tpm: count("input_tpm")?.unwrap_or(0),
            output_tpm: count("output_tpm")?.unwrap_or(0),
        },
        burst_seconds: count("burst_seconds")?,
        arrival_allowance_ms: count("arrival_allowance_ms")?,
        window,
        max_output_tokens: count("max_output_tokens")?,
        default_output_tokens: count("default_output_tokens")?,
        context_window: count("context_window")?,
        stream_idle_timeout_secs: count("stream_idle_timeout_secs")?,
        max_response_bytes: count("max_response_bytes")?,
        fallbacks,
        fallback_wait,
        price,
        batch,
        embedding,
        options,
        deployments,
    })
}

/// A `price` table (the model's, or its `batch.price`), USD per million tokens.
fn parse_price(
    value: &Value,
    at: &str,
    invalid: &dyn Fn(&str, String) -> CatalogError,
) -> Result<Price, CatalogError> {
    let Value::Table(p) = value else {
        return Err(invalid(
            at,
            format!("must be a table of USD per million tokens, got {value}"),
        ));
    };
    for key in p.keys() {
        if !PRICE_FIELDS.contains(&key.as_str()) {
            return Err(invalid(
                &format!("{at}.{key}"),
                format!("is not a known price; known: {}", PRICE_FIELDS.join(", ")),
            ));
        }
    }
    let get = |field: &str| -> Result<Option<f64>, CatalogError> {
        p.get(field)
            .map(number)
            .transpose()
            .map_err(|r| invalid(&format!("{at}.{field}"), r))
    };
    let required = |field: &str| -> Result<f64, CatalogError> {
        get(field)?.ok_or_else(|| {
            invalid(
                &format!("{at}.{field}"),
                format!("is required when `{at}` is given"),
            )
        })
    };
    Ok(Price {
        input: required("input")?,
        output: required("output")?,
        cache_read: get("cache_read")?.unwrap_or(0.0),
        cache_write: get("cache_write")?.unwrap_or(0.0),
        cache_write_1h: get("cache_write_1h")?,
    })
}

/// `[[models.ID.deployments]]` tables, or the shorthand `credentials = ["a", "b"]` (one
/// deployment per key, named after its credential id).
fn parse_deployments(
    table: &Table,
    invalid: &dyn Fn(&str, String) -> CatalogError,
) -> Result<Vec<Deployment>, CatalogError> {
    let mut deployments = Vec::new();
    match table.get("credentials") {
        None => {}
        Some(Value::Array(items)) => {
            for item in items {
                let Value::String(id) = item else {
                    return Err(invalid(
                        "credentials",
                        format!("must list credential ids as strings, got {item}"),
                    ));
                };
                deployments.push(Deployment::new(id.clone(), id.clone()));
            }
        }
        Some(other) => {
            return Err(invalid(
                "credentials",
                format!("must be an array of credential ids (one deployment each), got {other}"),
            ));
        }
    }
    match table.get("deployments") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let Value::Table(d) = item else {
                    return Err(invalid(
                        "deployments",
                        format!("must be `[[models.ID.deployments]]` tables, got {item}"),
                    ));
                };
                for key in d.keys() {
                    if !DEPLOYMENT_FIELDS.contains(&key.as_str()) {
                        return Err(invalid(
                            &format!("deployments.{key}"),
                            format!(
                                "is not a known field; known fields: {}",
                                DEPLOYMENT_FIELDS.join(", ")
                            ),
                        ));
                    }
                }
                let text = |field: &str| -> Result<Option<String>, CatalogError> {
                    match d.get(field) {
                        None => Ok(None),
                        Some(Value::String(s)) => Ok(Some(s.clone())),
                        Some(other) => Err(invalid(
                            &format!("deployments.{field}"),
                            format!("must be a string, got {} {other}", other.type_str()),
                        )),
                    }
                };
                let options = match d.get("options") {
                    None => Table::new(),
                    Some(Value::Table(t)) => t.clone(),
                    Some(other) => {
                        return Err(invalid(
                            "deployments.options",
                            format!("must be a table, got {other}"),
                        ));
                    }
                };
                let credential = text("credential")?;
                let name = text("name")?
                    .or_else(|| credential.clone())
                    .unwrap_or_else(|| i.to_string());
                deployments.push(Deployment {
                    name,
                    credential,
                    options,
                });
            }
        }
        Some(other) => {
            return Err(invalid(
                "deployments",
                format!("must be an array of `[[models.ID.deployments]]` tables, got {other}"),
            ));
        }
    }
    Ok(deployments)
}
