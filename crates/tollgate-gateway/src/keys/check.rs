//! Keys checked against the catalog they are served over: every model a key names is in
//! it, and a key with a daily budget can reach only priced models (an unpriced one would
//! cost nothing against the budget, so the budget would not hold).

use tollgate::Catalog;

use super::{Keys, KeysError, VirtualKey};

impl Keys {
    /// Checks the keys against `catalog` (the one the gateway serves), naming the first
    /// key at fault: a model in a key's `models` that the catalog lacks is
    /// [`KeysError::UnknownModel`]; a key with a `budget_usd_per_day` that may call a
    /// model without a `price` (any model of its `models`, or of the catalog when it
    /// lists none, or one of their `fallbacks`, which the call's budget follows) is
    /// [`KeysError::UnpricedBudget`]. [`Gateway::with_keys`](crate::Gateway::with_keys)
    /// and [`Gateway::with_keys_on`](crate::Gateway::with_keys_on) call it.
    pub fn check_against(&self, catalog: &Catalog) -> Result<(), KeysError> {
        for key in &self.keys {
            let unknown = key
                .models
                .iter()
                .flatten()
                .find(|model| catalog.model(model).is_none());
            if let Some(model) = unknown {
                return Err(KeysError::UnknownModel {
                    id: key.id.clone(),
                    model: model.clone(),
                });
            }
            if key.budget_usd_per_day.is_some()
                && let Some(model) = unpriced_reachable(key, catalog)
            {
                return Err(KeysError::UnpricedBudget {
                    id: key.id.clone(),
                    model,
                });
            }
        }
        Ok(())
    }
}

/// The first model without a price that `key`'s calls can reach: its models (every
/// catalog model when it lists none), then their fallbacks, transitively.
fn unpriced_reachable(key: &VirtualKey, catalog: &Catalog) -> Option<String> {
    // A stack: reversed, so the first model (in the key's order, else the catalog's) is
    // looked at first.
    let mut pending: Vec<String> = match &key.models {
        Some(models) => models.clone(),
        None => catalog.models().map(|m| m.id.clone()).collect(),
    };
    pending.reverse();
    let mut seen: Vec<String> = Vec::new();
    while let Some(id) = pending.pop() {
        if seen.contains(&id) {
            continue;
        }
        let Some(entry) = catalog.model(&id) else {
            continue;
        };
        if entry.price.is_none() {
            return Some(id);
        }
        pending.extend(entry.fallbacks.iter().rev().cloned());
        seen.push(id);
    }
    None
}

#[cfg(test)]
mod tests {
    use tollgate_fake as _;

    use super::*;
    use crate::keys::hash_secret;

    const CATALOG: &str = r#"
[models.priced]
provider = "fake"
max_output_tokens = 64
fallbacks = ["cheap-fallback"]
[models.priced.price]
input = 1.0
output = 2.0

[models.cheap-fallback]
provider = "fake"
max_output_tokens = 64

[models.alone]
provider = "fake"
max_output_tokens = 64
[models.alone.price]
input = 1.0
output = 2.0
"#;

    fn catalog() -> Catalog {
        Catalog::from_toml_str(CATALOG).unwrap()
    }

    fn key(lines: &str) -> Keys {
        Keys::from_toml_str(&format!(
            "[[keys]]\nid = \"nb\"\nsecret_sha256 = \"{}\"\n{lines}\n",
            hash_secret("s")
        ))
        .unwrap()
    }

    #[test]
    fn a_key_naming_a_model_outside_the_catalog_is_refused_naming_the_key_and_the_model() {
        let e = key("models = [\"alone\", \"gpt-typo\"]")
            .check_against(&catalog())
            .unwrap_err();
        assert!(
            matches!(&e, KeysError::UnknownModel { id, model } if id == "nb" && model == "gpt-typo"),
            "{e}"
        );
        assert!(e.to_string().contains("not in the catalog"), "{e}");
        key("models = [\"alone\", \"priced\"]")
            .check_against(&catalog())
            .unwrap();
    }

    #[test]
    fn a_budget_on_a_key_that_may_call_an_unpriced_model_is_refused_naming_both() {
        // Every catalog model when the key lists none.
        let e = key("budget_usd_per_day = 5.0")
            .check_against(&catalog())
            .unwrap_err();
        assert!(
            matches!(&e, KeysError::UnpricedBudget { id, model } if id == "nb" && model == "cheap-fallback"),
            "{e}"
        );
        let shown = e.to_string();
        assert!(
            shown.contains("`nb`") && shown.contains("cheap-fallback") && shown.contains("price"),
            "{shown}"
        );
        // A priced model whose fallback is unpriced: the fallback spends the budget too.
        let e = key("models = [\"priced\"]\nbudget_usd_per_day = 5.0")
            .check_against(&catalog())
            .unwrap_err();
        assert!(
            matches!(&e, KeysError::UnpricedBudget { model, .. } if model == "cheap-fallback"),
            "{e}"
        );
    }

    #[test]
    fn a_budget_over_priced_models_only_and_an_unpriced_model_without_a_budget_pass() {
        key("models = [\"alone\"]\nbudget_usd_per_day = 5.0")
            .check_against(&catalog())
            .unwrap();
        key("models = [\"cheap-fallback\"]")
            .check_against(&catalog())
            .unwrap();
        key("").check_against(&catalog()).unwrap();
    }
}
