//! The providers of the OpenAI wire format: one [`OpenAiProvider`] type made from a
//! [`Preset`] (this crate registers `openai` and `openai-compatible`; other crates
//! register theirs), and the transports it builds per model, all over the kit's
//! endpoint with the preset's rate-limit headers.

use std::sync::Arc;

use tollgate::provider::batch::BatchTransport;
use tollgate::provider::http::{Endpoint, HttpClient};
use tollgate::provider::{
    ChatTransport, DecisionTransport, EmbeddingsTransport, Provider, ProviderContext,
    ProviderTransports, TiktokenEstimator,
};
use tollgate::provider::{Error, ModelEntry, Result};

use crate::batch::OpenAiBatch;
use crate::chat::OpenAiChat;
use crate::decision::OpenAiDecision;
use crate::dialect::Preset;
use crate::embeddings::OpenAiEmbeddings;
use crate::options::{Api, OpenAiOptions};

/// A provider of the OpenAI wire format, made from a [`Preset`]: `openai` and
/// `openai-compatible` here, and every OpenAI-like provider crate's (one type, many
/// registrations: they share the codec and differ in what their preset says).
#[derive(Debug, Clone, Copy)]
pub struct OpenAiProvider {
    preset: Preset,
}

impl OpenAiProvider {
    /// The `openai` provider.
    pub const OPENAI: OpenAiProvider = OpenAiProvider::new(Preset::OPENAI);
    /// The `openai-compatible` provider.
    pub const COMPATIBLE: OpenAiProvider = OpenAiProvider::new(Preset::COMPATIBLE);

    /// The provider of `preset`; its dialect names the preset's key (in errors, and on
    /// the blocks it keeps), whatever the preset's dialect says.
    pub const fn new(preset: Preset) -> Self {
        let mut preset = preset;
        preset.dialect.provider = preset.key;
        OpenAiProvider { preset }
    }

    /// Its preset.
    pub const fn preset(&self) -> &Preset {
        &self.preset
    }

    /// A model's options, read for this preset.
    fn options(&self, model: &ModelEntry) -> Result<OpenAiOptions> {
        OpenAiOptions::for_preset(model, &self.preset, &[])
    }
}

impl PartialEq for OpenAiProvider {
    /// Providers are the same when their keys are (a key is registered once).
    fn eq(&self, other: &Self) -> bool {
        self.preset.key == other.preset.key
    }
}

impl Eq for OpenAiProvider {}

#[tollgate::provider::async_trait]
impl Provider for OpenAiProvider {
    fn key(&self) -> &'static str {
        self.preset.key
    }

    /// The preset's: `openai` for both of this crate's keys, since the conventions name
    /// the API an instrumentation speaks when the server behind it is unknown
    /// (`server.address` tells the servers apart).
    fn conventions_name(&self) -> &'static str {
        self.preset.conventions_name
    }

    /// The model's `base_url`. `Models::build` asks this of every catalog model of the
    /// provider, before any call.
    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        self.options(model).ok().map(|o| o.base_url)
    }

    /// Starts loading the model's tiktoken table on a thread of its own
    /// ([`TiktokenEncoding::warm_up`](tollgate::provider::TiktokenEncoding::warm_up)), so
    /// that the process's first call does not pay for the load (about 150 ms of CPU in a
    /// release build, 0.5–2 s in a debug one on a busy machine); build does not wait for
    /// it. `openai-compatible` loads nothing.
    fn prepare(&self, model: &ModelEntry) {
        if self.options(model).is_ok_and(|o| o.quirks.tiktoken) {
            TiktokenEstimator::for_model(&model.name).warm_up();
        }
    }

    /// The preset's: `openai-compatible` servers often take no key (a model may still
    /// name one).
    fn requires_credential(&self) -> bool {
        self.preset.requires_credential
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(OpenAiClients {
            provider: *self,
            http: HttpClient::new(context)?,
        }))
    }
}

#[derive(Debug)]
struct OpenAiClients {
    provider: OpenAiProvider,
    http: HttpClient,
}

impl OpenAiClients {
    /// The model's options and its endpoint: its address, its key (where the preset
    /// requires one), `OpenAI-Organization` and `OpenAI-Project`.
    fn endpoint(&self, model: &ModelEntry) -> Result<(Endpoint, OpenAiOptions)> {
        let preset = &self.provider.preset;
        let options = self.provider.options(model)?;
        let mut endpoint = self
            .http
            .endpoint(model, &options.base_url, preset.dialect.error)
            .rate_limits(preset.rate_limits);
        if preset.requires_credential {
            endpoint = endpoint.require_credential()?;
        }
        for (name, value) in fixed_headers(&options) {
            endpoint = endpoint.header(name, value);
        }
        Ok((endpoint, options))
    }
}

/// The headers every request of a model carries besides its key: `OpenAI-Organization`
/// and `OpenAI-Project`, where its options name them.
fn fixed_headers(options: &OpenAiOptions) -> Vec<(&'static str, String)> {
    [
        ("OpenAI-Organization", &options.organization),
        ("OpenAI-Project", &options.project),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name, value.clone()?)))
    .collect()
}

impl ProviderTransports for OpenAiClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let (endpoint, options) = self.endpoint(model)?;
        Ok(Arc::new(OpenAiChat::new(
            endpoint,
            model,
            options,
            &self.provider.preset,
        )))
    }

    /// Refused where the preset has no embeddings path.
    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        let preset = &self.provider.preset;
        let Some(path) = preset.paths.embeddings else {
            return Err(Error::Unsupported {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
                capability: "embeddings".into(),
            });
        };
        let (endpoint, options) = self.endpoint(model)?;
        Ok(Arc::new(OpenAiEmbeddings::new(
            endpoint, model, options, path,
        )))
    }

    /// Refuses a model whose options say its server returns no logprobs.
    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        let (endpoint, options) = self.endpoint(model)?;
        if !options.quirks.logprobs {
            return Err(Error::Unsupported {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
                capability: "decision (the decision client reads logprobs, and this model's \
                             catalog entry says its server returns none: `options.logprobs = false`)"
                    .into(),
            });
        }
        let preset = &self.provider.preset;
        Ok(Arc::new(OpenAiDecision::new(
            endpoint,
            model,
            options,
            preset.paths.chat,
            preset.dialect,
        )))
    }

    /// The preset's batch API ([`Dialect::batch`](crate::preset::Dialect::batch)) over
    /// Chat Completions: refused where the preset has none, and for a model whose chat
    /// goes through the Responses API (its batches would need the Responses decoder).
    fn batch(&self, model: &ModelEntry) -> Result<Arc<dyn BatchTransport>> {
        let preset = &self.provider.preset;
        let unsupported = |why: &str| Error::Unsupported {
            model_id: model.id.clone(),
            provider: model.provider.clone(),
            capability: format!("batch ({why})"),
        };
        let Some(api) = preset.dialect.batch else {
            return Err(unsupported("this provider's preset names no batch API"));
        };
        let (endpoint, options) = self.endpoint(model)?;
        if options.api == Api::Responses {
            return Err(unsupported(
                "batches go through Chat Completions, and this model's catalog entry says \
                 `options.api = \"responses\"`",
            ));
        }
        let chat = OpenAiChat::new(endpoint, model, options, preset);
        Ok(Arc::new(OpenAiBatch::new(api, chat, model)))
    }
}
