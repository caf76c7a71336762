//! The credential parsers: the credentials file (TOML `id = "secret"`) of
//! `FileCredentialStore`, and the AWS credential record (JSON) of the Bedrock providers.
//! The first line is the id looked up, the rest the file.

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (id, file) = text.split_once('\n').unwrap_or(("openai-main", text));
    if let Ok(secret) = tollgate::credentials::parse_credentials_file("creds.toml", file, id) {
        let _ = secret.expose_secret();
    }
    let _ = tollgate_bedrock::fuzzing::parse_aws_record(id, file);
}
