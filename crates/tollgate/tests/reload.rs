//! `Models::reloaded`: a new catalog for new calls, the buckets of every model whose
//! limits did not change kept.

use std::sync::Arc;

use tollgate::{Catalog, Models};
use tollgate_fake as _;

const BEFORE: &str = r#"
    [models.same]
    provider = "fake"
    rpm = 60
    max_output_tokens = 64
    [models.same.price]
    input = 1.0
    output = 1.0

    [models.changed]
    provider = "fake"
    rpm = 60
    max_output_tokens = 64

    [models.gone]
    provider = "fake"
    rpm = 60
    max_output_tokens = 64
"#;

const AFTER: &str = r#"
    [models.same]
    provider = "fake"
    rpm = 60
    max_output_tokens = 64
    [models.same.price]
    input = 2.0
    output = 2.0

    [models.changed]
    provider = "fake"
    rpm = 120
    max_output_tokens = 64

    [models.new]
    provider = "fake"
    rpm = 60
    max_output_tokens = 64
"#;

#[test]
fn a_reloaded_catalog_keeps_the_limiter_of_a_model_whose_limits_did_not_change() {
    let before = Models::builder()
        .catalog(Catalog::from_toml_str(BEFORE).unwrap())
        .build()
        .unwrap();
    let after = before
        .reloaded(Catalog::from_toml_str(AFTER).unwrap())
        .unwrap();
    // A price changed, not a limit: the same buckets, and the new price is served.
    assert!(Arc::ptr_eq(
        before.limiter("same").unwrap(),
        after.limiter("same").unwrap()
    ));
    assert_eq!(
        after.catalog().model("same").unwrap().price.unwrap().input,
        2.0
    );
    // A limit changed: fresh buckets at the new limit; the old handle keeps its own.
    assert!(!Arc::ptr_eq(
        before.limiter("changed").unwrap(),
        after.limiter("changed").unwrap()
    ));
    assert_eq!(before.catalog().model("changed").unwrap().limits.rpm, 60);
    assert!(after.limiter("new").is_ok());
    assert!(after.limiter("gone").is_err());
    assert!(before.limiter("gone").is_ok());
}
