//! What can be wrong with a catalog, and a model id it does not have.

/// A catalog mistake, naming the model and the field to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The file could not be read.
    #[error("catalog: cannot read `{path}`: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("catalog is not valid TOML: {message}")]
    Syntax {
        /// The parser's message, with the line.
        message: String,
    },
    /// A top-level section other than `models` and `embeddings`, or a bad value in one.
    #[error("catalog: field `{field}` {reason}")]
    InvalidSection {
        /// The field, e.g. `embeddings.width`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A field of a model is missing, of the wrong type, out of range or unknown.
    #[error("catalog model `{model_id}`: field `{field}` {reason}")]
    InvalidField {
        /// The model id.
        model_id: String,
        /// The field, e.g. `rpm` or `price.input`.
        field: String,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The model names a provider key that no linked crate registers.
    #[error(
        "catalog model `{model_id}`: field `provider` names `{provider}`, which no crate linked into this binary registers; linked providers: {known}; {hint}"
    )]
    UnknownProvider {
        /// The model id.
        model_id: String,
        /// The key given.
        provider: String,
        /// The known keys, each with the crate that registers it.
        known: String,
        /// What to add.
        hint: String,
    },
    /// `default_output_tokens` is above `max_output_tokens`.
    #[error(
        "catalog model `{model_id}`: field `default_output_tokens` ({default_output_tokens}) is above \
         field `max_output_tokens` ({max_output_tokens}); lower the default or raise the ceiling"
    )]
    DefaultAboveMax {
        /// The model id.
        model_id: String,
        /// The default given.
        default_output_tokens: u64,
        /// The ceiling given.
        max_output_tokens: u64,
    },
    /// A fallback names a model that is not in the catalog.
    #[error(
        "catalog model `{model_id}`: field `fallbacks` names `{fallback}`, which is not in the catalog"
    )]
    UnknownFallback {
        /// The model id.
        model_id: String,
        /// The unknown fallback.
        fallback: String,
    },
    /// A model lists itself as its own fallback.
    #[error(
        "catalog model `{model_id}`: field `fallbacks` names the model itself; a fallback must be another model"
    )]
    SelfFallback {
        /// The model id.
        model_id: String,
    },
    /// The provider needs a credential and the model names none.
    #[error(
        "catalog model `{model_id}`: field `credential` is missing; provider `{provider}` needs the id \
         of a secret in the credential store"
    )]
    MissingCredential {
        /// The model id.
        model_id: String,
        /// The provider key.
        provider: String,
    },
    /// Two models share an id.
    #[error(
        "catalog model `{model_id}` is defined twice (field `models.{model_id}`); model ids must be unique"
    )]
    DuplicateModel {
        /// The repeated id.
        model_id: String,
    },
    /// An alias is already a name of the catalog: a model's id, or another alias.
    #[error(
        "catalog model `{model_id}`: field `{field}` names `{name}`, which is {taken_by}; \
         every id and alias must name one model"
    )]
    NameTaken {
        /// The model whose alias it is.
        model_id: String,
        /// The field, `aliases`.
        field: &'static str,
        /// The alias.
        name: String,
        /// What the name is already, e.g. "the id of model `x`".
        taken_by: String,
    },
    /// Two models (or one model twice) list the same pattern.
    #[error(
        "catalog model `{model_id}`: field `patterns` lists `{pattern}`, which model `{other_model}` \
         lists too; a pattern must lead to one model"
    )]
    DuplicatePattern {
        /// The model listing it second.
        model_id: String,
        /// The pattern.
        pattern: String,
        /// The model listing it first.
        other_model: String,
    },
    /// An embeddings model cannot produce the deployment's width.
    #[error(
        "catalog model `{model_id}`: field `{field}`: the model cannot produce the deployment's embedding \
         width {width}: {reason}"
    )]
    EmbeddingWidth {
        /// The model id.
        model_id: String,
        /// The field to change.
        field: String,
        /// The deployment's width (`[embeddings] width`).
        width: u64,
        /// Why not, and what would fix it.
        reason: String,
    },
}

/// A model id that is not in the catalog; becomes [`crate::Error::UnknownModel`] with `?`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model `{model_id}` is not in the catalog; known models: {known}")]
pub struct UnknownModel {
    /// What was asked for.
    pub model_id: String,
    /// The catalog's model ids, comma-separated.
    pub known: String,
}
