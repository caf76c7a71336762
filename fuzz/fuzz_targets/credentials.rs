//! The credential parsers: the credentials file (TOML `id = "secret"`) of
//! `FileCredentialStore`, and the AWS credential record (JSON) of the Bedrock providers.
//! The first line is the id looked up, the rest the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (id, file) = text.split_once('\n').unwrap_or(("openai-main", text));
    if let Ok(secret) = tollgate::credentials::parse_credentials_file("creds.toml", file, id) {
        let _ = secret.expose_secret();
    }
    let _ = tollgate_bedrock::fuzzing::parse_aws_record(id, file);
});
