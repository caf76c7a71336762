//! Later system messages, for providers whose wire format has only a leading system
//! field (Gemini's `systemInstruction`, Bedrock's `system`, Anthropic's `system` on
//! models without mid-conversation system messages): folded into the user turns in
//! place, so the system field and the cached prefix before them stay the same.

use crate::conversation::{Block, Message, Role};
use crate::request::LlmRequest;

/// The request's turns (after its leading system messages) with every later system
/// message folded into a user turn at its position: its text wrapped in
/// `<system-reminder>` tags, appended to the user message before it, or else put in
/// front of the user message after it, or else a user message of its own. A request
/// with no later system message comes back as it is.
pub fn folded_turns(request: &LlmRequest) -> Vec<Message> {
    let turns = request.turns();
    if !has_later_system(request) {
        return turns.to_vec();
    }
    let mut out: Vec<Message> = Vec::with_capacity(turns.len());
    let mut pending: Vec<Block> = Vec::new();
    for message in turns {
        if message.role == Role::System {
            let folded = reminder(&message.content);
            match out.last_mut() {
                Some(last) if last.role == Role::User && pending.is_empty() => {
                    last.content.extend(folded)
                }
                _ => pending.extend(folded),
            }
            continue;
        }
        let mut message = message.clone();
        if !pending.is_empty() {
            if message.role == Role::User {
                let rest = std::mem::take(&mut message.content);
                message.content = std::mem::take(&mut pending);
                message.content.extend(rest);
            } else {
                out.push(Message {
                    role: Role::User,
                    content: std::mem::take(&mut pending),
                });
            }
        }
        out.push(message);
    }
    if !pending.is_empty() {
        out.push(Message {
            role: Role::User,
            content: pending,
        });
    }
    out
}

/// Whether the request has a system message after its first user or assistant turn.
pub fn has_later_system(request: &LlmRequest) -> bool {
    request.turns().iter().any(|m| m.role == Role::System)
}

fn reminder(content: &[Block]) -> Vec<Block> {
    content
        .iter()
        .map(|block| match block {
            Block::Text { text, cache } => Block::Text {
                text: format!("<system-reminder>\n{text}\n</system-reminder>"),
                cache: *cache,
            },
            other => other.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SamplingParams;

    fn request(messages: Vec<Message>) -> LlmRequest {
        LlmRequest::new("m", messages, vec![], SamplingParams::new()).unwrap()
    }

    #[test]
    fn a_later_system_message_joins_the_user_turn_before_it() {
        let r = request(vec![
            Message::system("lead"),
            Message::user("hi"),
            Message::system("env"),
            Message::assistant("hello"),
        ]);
        let turns = folded_turns(&r);
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].role, Role::User);
        assert_eq!(
            turns[0].text(),
            "hi<system-reminder>\nenv\n</system-reminder>"
        );
        assert_eq!(turns[1].role, Role::Assistant);
    }

    #[test]
    fn a_system_message_after_an_assistant_turn_opens_the_next_user_turn() {
        let r = request(vec![
            Message::user("hi"),
            Message::assistant("hello"),
            Message::system("now be brief"),
            Message::user("why?"),
        ]);
        let turns = folded_turns(&r);
        assert_eq!(turns.len(), 3);
        assert_eq!(
            turns[2].text(),
            "<system-reminder>\nnow be brief\n</system-reminder>why?"
        );
    }

    #[test]
    fn a_trailing_system_message_after_an_assistant_turn_is_a_user_turn() {
        let r = request(vec![
            Message::user("hi"),
            Message::assistant("hello"),
            Message::system("wrap up"),
        ]);
        let turns = folded_turns(&r);
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[2].role, Role::User);
        assert!(!has_later_system(&request(vec![
            Message::system("lead"),
            Message::user("hi")
        ])));
    }
}
