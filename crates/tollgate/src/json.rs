//! JSON values that can live inside `Eq + Hash` types, and the canonical JSON writer
//! behind cache keys and response digests.
//!
//! Canonical form: object keys sorted by their UTF-8 bytes at every depth, no
//! whitespace, strings and numbers as `serde_json` prints them. It does not depend on
//! how a map was built or which `serde_json` features are switched on, so the same value
//! gives the same bytes on every run and platform.

use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A JSON value (tool input, JSON Schema) with equality and hashing by canonical form.
///
/// Two `Json` values are equal exactly when their canonical serializations are equal,
/// so `{"a":1,"b":2}` equals `{"b":2,"a":1}`.
#[derive(Clone, Default)]
pub struct Json(Value);

impl Json {
    /// Wraps a `serde_json::Value`.
    pub fn new(value: Value) -> Self {
        Json(value)
    }

    /// The wrapped value.
    pub fn value(&self) -> &Value {
        &self.0
    }

    /// Takes the wrapped value out.
    pub fn into_value(self) -> Value {
        self.0
    }

    /// The canonical serialization (sorted keys, no whitespace).
    pub fn canonical(&self) -> String {
        canonical_string(&self.0)
    }
}

impl From<Value> for Json {
    fn from(value: Value) -> Self {
        Json(value)
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Self) -> bool {
        self.canonical() == other.canonical()
    }
}

impl Eq for Json {}

impl Hash for Json {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical().hash(state);
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Json)
    }
}

/// A finite floating-point parameter (temperature, top_p) with `Eq` and `Hash` by value.
///
/// `-0.0` is stored as `0.0` so equal numbers hash alike. Construct with
/// [`Float::new`], which refuses NaN and infinities.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
pub struct Float(f64);

impl Float {
    /// Returns `None` for NaN or an infinity.
    pub fn new(value: f64) -> Option<Self> {
        if value.is_finite() {
            Some(Float(if value == 0.0 { 0.0 } else { value }))
        } else {
            None
        }
    }

    /// The number.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Eq for Float {}

impl Hash for Float {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

impl fmt::Debug for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Serialize for Float {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Float {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(deserializer)?;
        Float::new(value).ok_or_else(|| serde::de::Error::custom("expected a finite number"))
    }
}

/// Serializes `value` canonically: sorted object keys at every depth, no whitespace.
pub(crate) fn canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// Serializes any `Serialize` value canonically.
pub(crate) fn canonical_bytes<T: Serialize + ?Sized>(
    value: &T,
) -> Result<Vec<u8>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    Ok(canonical_string(&value).into_bytes())
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_scalar(&Value::String(key.clone()), out);
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut String) {
    // Scalars have exactly one compact serialization in serde_json.
    out.push_str(&value.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_sorts_keys_at_every_depth() {
        let a: Value = json!({"b": 1, "a": {"d": [1, {"z": 1, "y": 2}], "c": null}});
        assert_eq!(
            canonical_string(&a),
            r#"{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}"#
        );
    }

    #[test]
    fn json_equality_ignores_key_order() {
        let a: Json = serde_json::from_str(r#"{"x":1,"y":[true,"s"]}"#).unwrap();
        let b: Json = serde_json::from_str(r#"{"y":[true,"s"],"x":1}"#).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn float_refuses_nan_and_infinity_and_folds_negative_zero() {
        assert!(Float::new(f64::NAN).is_none());
        assert!(Float::new(f64::INFINITY).is_none());
        assert_eq!(Float::new(-0.0), Float::new(0.0));
    }
}
