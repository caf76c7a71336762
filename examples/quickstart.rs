//! The quickstart: a two-turn conversation through `Models` on the embedded `fake`
//! provider. No keys, no network.
//!
//! Run it with `cargo run --example quickstart`.

use std::io::Write;
use std::sync::Arc;

use futures::StreamExt;
use tollgate::catalog::{Limits, ModelEntry, Price};
use tollgate::pipeline::MemoryRecorder;
use tollgate::{Catalog, Conversation, Models, SamplingParams, StreamEvent, compute_cache_key};

// Linking a provider crate is one line: it registers the provider's key ("fake").
use tollgate_fake as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. A catalog built in code: one chat model on the `fake` provider, with limits
    //    and prices as a real model would have, and two scripted answers.
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("assistant", "fake", "fake-chat-1")
                .with_limits(Limits { rpm: 60, tpm: 100_000, ..Limits::default() })
                .with_output_tokens(4096, 512)
                .with_price(Price { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75, cache_write_1h: None })
                .with_option(
                    "replies",
                    vec![
                        "A token bucket refills continuously, so callers wait exactly as long as the limit requires.",
                        "Because a rejected request still costs time, and often quota, reserving first wastes neither.",
                    ],
                ),
        )
        .build()?;

    // 2. Models joins the catalog, a credential store (none needed here) and the linked
    //    providers; every call runs through the pipeline (reserve before send, retries by
    //    type, records). The fake provider is built on this first call.
    let recorder = Arc::new(MemoryRecorder::new());
    let models = Models::builder()
        .catalog(catalog)
        .recorder(recorder.clone())
        .build()?;
    let chat = models.chat("assistant").await?;

    // 3. A conversation, turn by turn; each answer is streamed as it is produced.
    let mut conversation =
        Conversation::new().with_system("You explain rate limiting in one sentence.");
    let price = models.catalog().get("assistant")?.price;
    for (seq, question) in [
        "How does a token bucket work?",
        "Why reserve before sending?",
    ]
    .into_iter()
    .enumerate()
    {
        conversation.push_user(question);
        let request =
            conversation.request("assistant", SamplingParams::new().with_temperature(0.2)?)?;
        println!("user: {question}");
        print!("assistant: ");
        let mut stream = chat.stream_response(&request).await?;
        let mut answer = None;
        while let Some(event) = stream.next().await {
            match event? {
                StreamEvent::TextDelta { text, .. } => {
                    print!("{text}");
                    std::io::stdout().flush()?;
                }
                StreamEvent::Completed(response) => answer = Some(response),
                _ => {}
            }
        }
        println!();
        let answer = answer.ok_or("the stream ended without its answer")?;
        let usage = answer.usage();
        let cost = price.map(|p| p.cost_usd(&usage)).unwrap_or_default();
        println!(
            "  usage: {} input + {} output tokens (cache read {}, cache write {}), cost ${cost:.6}",
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens
        );
        println!(
            "  cache key: {}",
            compute_cache_key(&request, "quickstart", seq as u64)?
        );
        println!("  response digest: {}", answer.response_digest_hex());
        if let Some(record) = recorder.calls().last() {
            println!(
                "  pipeline: {} attempt(s), outcome {:?}",
                record.attempts, record.outcome
            );
        }
        conversation.push_response(&answer);
    }
    Ok(())
}
