//! The two Bedrock providers, `bedrock-converse` and `anthropic-bedrock`: the same
//! factory (an SDK client per model, made on its first call) with different transports.
//! Bedrock's limits are seen through `ThrottlingException`s only: it sends no rate-limit
//! headers, so there is no header table.

use std::sync::Arc;

use tollgate::provider::{
    ChatTransport, EmbeddingsTransport, Provider, ProviderContext, ProviderTransports,
};
use tollgate::provider::{ModelEntry, Result};

use crate::anthropic::AnthropicBedrockChat;
use crate::client::{BedrockClient, BedrockOptions};
use crate::converse::ConverseChat;
use crate::embeddings::BedrockEmbeddings;

/// The `bedrock-converse` provider. Registered through `inventory`.
#[derive(Debug, Default, Clone, Copy)]
pub struct BedrockConverseProvider;

/// The `anthropic-bedrock` provider. Registered through `inventory`.
#[derive(Debug, Default, Clone, Copy)]
pub struct AnthropicBedrockProvider;

/// What both providers are: `aws.bedrock` to the conventions, the region's runtime
/// address (or `endpoint_url`) as their base URL, the AWS default credential chain for
/// a model without a `credential`, and their transports (`$transports`) built around the
/// provider context.
macro_rules! bedrock_provider {
    ($provider:ident, $key:expr, $transports:ident) => {
        #[tollgate::provider::async_trait]
        impl Provider for $provider {
            fn key(&self) -> &'static str {
                $key
            }

            fn conventions_name(&self) -> &'static str {
                "aws.bedrock"
            }

            fn base_url(&self, model: &ModelEntry) -> Option<String> {
                BedrockOptions::from_model(model)
                    .ok()
                    .and_then(|o| o.base_url())
            }

            /// A model without a `credential` uses the AWS default credential chain.
            fn requires_credential(&self) -> bool {
                false
            }

            async fn build(
                &self,
                context: &ProviderContext,
            ) -> Result<Arc<dyn ProviderTransports>> {
                Ok(Arc::new($transports {
                    context: context.clone(),
                }))
            }
        }
    };
}

bedrock_provider!(
    BedrockConverseProvider,
    crate::BEDROCK_CONVERSE,
    ConverseTransports
);
bedrock_provider!(
    AnthropicBedrockProvider,
    crate::ANTHROPIC_BEDROCK,
    AnthropicTransports
);

/// `bedrock-converse`: Converse chat; Titan and Cohere embeddings.
#[derive(Debug)]
struct ConverseTransports {
    context: ProviderContext,
}

impl ProviderTransports for ConverseTransports {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let aws = BedrockClient::new(model, &self.context)?;
        Ok(Arc::new(ConverseChat::new(aws)))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        let aws = BedrockClient::new(model, &self.context)?;
        Ok(Arc::new(BedrockEmbeddings::new(aws)?))
    }
}

/// `anthropic-bedrock`: Claude chat over InvokeModel.
#[derive(Debug)]
struct AnthropicTransports {
    context: ProviderContext,
}

impl ProviderTransports for AnthropicTransports {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let aws = BedrockClient::new(model, &self.context)?;
        Ok(Arc::new(AnthropicBedrockChat::new(aws)))
    }
}
