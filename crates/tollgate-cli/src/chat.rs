//! `tollgate chat`: one prompt, or a conversation with `-i`, streamed.
//!
//! Each answer is one job at [`Priority::Interactive`]: a person is waiting, so a
//! limiter that applies classes grants it before the batches sharing it.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;
use tollgate::limit::Priority;
use tollgate::pipeline::{FallbackOptions, RetryPolicy};
use tollgate::{
    Conversation, JobContext, Json, LlmClient, LlmResponse, Models, ResponseShape, SamplingParams,
    StreamEvent,
};

use crate::CliResult;
use crate::record::CliRecorder;
use crate::setup::Source;

/// Chat with a model: the prompt from the arguments and/or stdin, the answer streamed.
///
/// Piped text comes first, then the argument, so `cat notes.txt | tollgate chat -m demo
/// "Summarize:"` sends the notes followed by the instruction.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tollgate chat -m demo 'Why reserve before sending?'\n  \
    cat notes.txt | tollgate chat -m demo --usage 'Summarize the above'\n  \
    tollgate chat -m demo --json schema.json 'Name a colour'\n  \
    tollgate chat -m demo -i --system 'You are terse.'")]
pub(crate) struct ChatArgs {
    /// The catalog model.
    #[arg(short, long)]
    model: String,
    /// The prompt (joined with spaces); may be empty with -i or piped input.
    prompt: Vec<String>,
    /// An interactive conversation: one turn per line of input, until end of input.
    #[arg(short, long)]
    interactive: bool,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    /// Structured output: the answer must match this JSON Schema file (printed as JSON).
    #[arg(long, value_name = "SCHEMA_FILE")]
    json: Option<PathBuf>,
    /// Print tokens and cost after each answer (to stderr).
    #[arg(long)]
    usage: bool,
    /// The output limit in tokens (default: the catalog's `default_output_tokens`).
    #[arg(long)]
    max_tokens: Option<u64>,
    /// Send to the catalog's `fallbacks` when the model cannot serve now.
    #[arg(long)]
    fallback: bool,
    /// Also append every call and attempt record to this file.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

pub(crate) async fn chat(source: &Source, args: ChatArgs) -> CliResult {
    let recorder = Arc::new(CliRecorder::with_file(args.record.as_deref())?);
    let (models, _) = source.models(recorder)?;
    let entry = models.catalog().get(&args.model)?.clone();
    let mut needed = vec![entry.id.clone()];
    if args.fallback {
        needed.extend(entry.fallbacks.iter().cloned());
    }
    source.check_credentials(&models, &needed).await?;
    let mut params = SamplingParams::new();
    if let Some(max) = args.max_tokens {
        params = params.with_max_output_tokens(max)?;
    }
    if let Some(path) = &args.json {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read schema `{}`: {e}", path.display()))?;
        let schema: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("schema `{}` is not JSON: {e}", path.display()))?;
        params = params.with_response_shape(ResponseShape {
            name: "response".into(),
            schema: Json::new(schema),
            strict: Some(true),
        });
    }
    let mut conversation = Conversation::new();
    if let Some(system) = &args.system {
        conversation = conversation.with_system(system.clone());
    }
    let turn = Turn {
        models: &models,
        fallback: args.fallback,
        model_id: &entry.id,
        params: &params,
        structured: args.json.is_some(),
        usage: args.usage,
    };
    // Fails now, before any input is read, if the model cannot serve chat here.
    turn.client().await?;
    let mut first = String::new();
    if !std::io::stdin().is_terminal() && !args.interactive {
        std::io::stdin().read_to_string(&mut first)?;
    }
    let arg = args.prompt.join(" ");
    if !arg.is_empty() {
        if !first.is_empty() && !first.ends_with('\n') {
            first.push('\n');
        }
        first.push_str(&arg);
    }
    if !first.trim().is_empty() {
        conversation.push_user(first);
        let answer = turn.answer(&conversation).await?;
        conversation.push_response(&answer);
    } else if !args.interactive {
        return Err("no prompt: give one as an argument, pipe it in, or use -i".into());
    }
    if args.interactive {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        loop {
            eprint!("> ");
            std::io::stderr().flush()?;
            let Some(line) = lines.next_line().await? else {
                break;
            };
            if line.trim().is_empty() {
                continue;
            }
            conversation.push_user(line);
            let answer = turn.answer(&conversation).await?;
            conversation.push_response(&answer);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How each answer is asked for.
pub(crate) struct Turn<'a> {
    pub(crate) models: &'a Models,
    /// Through the model's fallbacks.
    pub(crate) fallback: bool,
    pub(crate) model_id: &'a str,
    pub(crate) params: &'a SamplingParams,
    /// Structured output: printed as JSON, not streamed.
    pub(crate) structured: bool,
    /// Print tokens and cost after each answer.
    pub(crate) usage: bool,
}

impl Turn<'_> {
    /// A client whose calls are one interactive job (its own retry budget).
    async fn client(&self) -> Result<Arc<dyn LlmClient>, tollgate::Error> {
        let job = JobContext::new("chat", RetryPolicy::default().default_retries)
            .with_priority(Priority::Interactive);
        let models = self.models.for_job(job);
        if self.fallback {
            models
                .chat_with_fallbacks(self.model_id, FallbackOptions::default())
                .await
        } else {
            models.chat(self.model_id).await
        }
    }

    /// Asks for the answer to `conversation`, as one interactive job, and prints it.
    pub(crate) async fn answer(
        &self,
        conversation: &Conversation,
    ) -> Result<LlmResponse, tollgate::Error> {
        let client = self.client().await?;
        let request = conversation.request(self.model_id, self.params.clone())?;
        let mut stdout = std::io::stdout();
        let answer = if self.structured {
            let answer = client.single_response(&request).await?;
            let _ = writeln!(stdout, "{}", answer.text());
            answer
        } else {
            let mut stream = client.stream_response(&request).await?;
            let mut answer = None;
            while let Some(event) = stream.next().await {
                match event? {
                    StreamEvent::TextDelta { text, .. } => {
                        let _ = write!(stdout, "{text}");
                        let _ = stdout.flush();
                    }
                    StreamEvent::Completed(response) => answer = Some(response),
                    _ => {}
                }
            }
            let _ = writeln!(stdout);
            answer.ok_or(tollgate::Error::InvalidRequest {
                field: "stream".into(),
                reason: "ended without its answer".into(),
            })?
        };
        if self.usage {
            let usage = answer.usage();
            let price = self
                .models
                .catalog()
                .model(self.model_id)
                .and_then(|m| m.price);
            let cost = price
                .map(|p| format!("${:.6}", p.cost_usd(&usage)))
                .unwrap_or_else(|| "unpriced".into());
            eprintln!(
                "usage: {} input tokens ({} cached), {} output tokens, cost {cost}",
                usage.total_input_tokens(),
                usage.cache_read_tokens,
                usage.output_tokens
            );
        }
        Ok(answer)
    }
}
