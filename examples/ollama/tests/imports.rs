//! What `examples/ollama` shows a provider author: a whole provider crate written with
//! `tollgate::provider` alone, short enough to read in one sitting.

const SOURCE: &str = include_str!("../src/lib.rs");

#[test]
fn the_provider_imports_only_tollgate_provider_and_stays_within_150_lines() {
    for line in SOURCE.lines().map(str::trim_start) {
        if line.starts_with("use tollgate") {
            assert!(
                line.starts_with("use tollgate::provider"),
                "imports from outside tollgate::provider: {line}"
            );
        }
    }
    let paths = SOURCE.matches("tollgate::").count();
    let kit = SOURCE.matches("tollgate::provider").count();
    let macro_call = SOURCE.matches("tollgate::register_provider!").count();
    assert_eq!(
        paths,
        kit + macro_call,
        "every tollgate path is the kit (or the registration macro, which #[macro_export] puts at the root)"
    );
    let lines = SOURCE.lines().count();
    assert!(lines <= 150, "src/lib.rs is {lines} lines");
}
