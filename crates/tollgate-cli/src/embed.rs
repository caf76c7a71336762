//! `tollgate embed`: lines of stdin to JSON lines of vectors, batched through the
//! pipeline.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use crate::CliResult;
use crate::record::CliRecorder;
use crate::run::Purpose;
use crate::setup::Source;

/// Embed each line of stdin; print one JSON line per input line: `{"index", "text",
/// "embedding"}`. Vectors are L2-normalized, of the catalog's `[embeddings] width`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    printf 'first document\\nsecond document\\n' | tollgate embed -m demo-embed\n  \
    echo 'what is a token bucket?' | tollgate embed -m demo-embed --purpose query")]
pub(crate) struct EmbedArgs {
    /// The catalog embeddings model.
    #[arg(short, long)]
    model: String,
    /// What the texts are for.
    #[arg(long, value_enum, default_value_t = Purpose::Document)]
    purpose: Purpose,
    /// Texts per call to the pipeline (it splits further to the provider's batch size).
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Also append every call and attempt record to this file.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

pub(crate) async fn embed(source: &Source, args: EmbedArgs) -> CliResult {
    let recorder = Arc::new(CliRecorder::with_file(args.record.as_deref())?);
    let (models, _) = source.models(recorder)?;
    source
        .check_credentials(&models, std::slice::from_ref(&args.model))
        .await?;
    let client = models.embeddings(&args.model).await?;
    let texts: Vec<String> = std::io::stdin()
        .lock()
        .lines()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let mut stdout = std::io::stdout().lock();
    let mut index = 0usize;
    for chunk in texts.chunks(args.batch.max(1)) {
        let vectors = client.embed_batch(chunk, args.purpose.into()).await?;
        for (text, vector) in chunk.iter().zip(vectors) {
            writeln!(
                stdout,
                "{}",
                json!({"index": index, "text": text, "embedding": vector.as_slice()})
            )?;
            index += 1;
        }
    }
    Ok(ExitCode::SUCCESS)
}
