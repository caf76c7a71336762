//! The input file's upload body: a `multipart/form-data` form of the file and its
//! `purpose`, as the files endpoints of OpenAI, Groq and Mistral take it. Wire format
//! only: it is sent, like every batch request, through the model's live endpoint.

/// A `multipart/form-data` body of two fields, `purpose` and `file`: its content type
/// (with the boundary) and its bytes. The boundary is one that `content` does not hold
/// after a line break (encoded lines hold no carriage return, so the first is taken
/// without a search).
pub(crate) fn multipart(purpose: &str, file_name: &str, content: &[u8]) -> (String, Vec<u8>) {
    let has_cr = content.contains(&b'\r');
    let boundary = (0u32..)
        .map(|n| format!("tollgate-batch-{n:08x}"))
        .find(|b| !has_cr || !holds(content, format!("\r\n--{b}").as_bytes()))
        .unwrap_or_default();
    let mut body = Vec::with_capacity(content.len() + 512);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{purpose}\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Whether `haystack` holds `needle`.
fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
