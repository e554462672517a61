//! The fixture prompts, and `completion/complete` for their arguments and the template's.

use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, Prompt, Reference,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::{complete, count, from_json, input_required};
use crate::calls::PNG_BASE64;
use crate::server::State;

/// The name of the `k`-th prompt that `test_trigger_prompt_change` adds.
pub fn added_name(k: usize) -> String {
    format!("test_added_prompt_{k}")
}

/// What `completion/complete` offers for `arg1` of `test_prompt_with_arguments` and for the
/// template's `id`, filtered by the typed prefix.
const ARG1_VALUES: &[&str] = &["paris", "park", "party", "test", "testValue1"];
const ID_VALUES: &[&str] = &["1", "2", "3", "123"];

pub fn list(state: &State) -> Result<ListPromptsResult, ErrorData> {
    let argument = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    let mut prompts: Vec<Prompt> = from_json(
        "the conformance prompts",
        json!([
            {"name": "test_simple_prompt", "description": "A simple prompt without arguments"},
            {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments",
             "arguments": [argument("arg1", "First test argument"), argument("arg2", "Second test argument")]},
            {"name": "test_prompt_with_embedded_resource", "description": "A prompt that embeds a resource",
             "arguments": [argument("resourceUri", "URI of the resource to embed")]},
            {"name": "test_prompt_with_image", "description": "A prompt with an image"},
            {"name": input_required::PROMPT,
             "description": "A prompt that asks the client for its context first (InputRequiredResult on 2026-07-28)"}
        ]),
    )?;
    prompts.extend((1..=count(&state.fixture.added_prompts)).map(|k| {
        Prompt::new(
            added_name(k),
            Some("Added by test_trigger_prompt_change"),
            None,
        )
    }));
    let prompts = crate::server::changed_listing(prompts, "prompt:", |p: &Prompt| p.name.clone());
    Ok(ListPromptsResult::with_all_items(prompts))
}

fn argument<'a>(request: &'a GetPromptRequestParams, name: &str) -> Result<&'a str, ErrorData> {
    request
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get(name))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "prompt {}: missing argument `{name}` (a string)",
                    request.name
                ),
                None,
            )
        })
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn user_text(text: &str) -> Value {
    user(json!({"type": "text", "text": text}))
}

pub async fn get(
    state: &State,
    request: GetPromptRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<GetPromptResponse, ErrorData> {
    let added = (1..=count(&state.fixture.added_prompts)).any(|k| added_name(k) == request.name);
    let messages = match request.name.as_str() {
        "test_simple_prompt" => vec![user_text("This is a simple prompt for testing.")],
        "test_prompt_with_arguments" => {
            let (arg1, arg2) = (argument(&request, "arg1")?, argument(&request, "arg2")?);
            vec![user_text(&format!(
                "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            ))]
        }
        "test_prompt_with_embedded_resource" => {
            let uri = argument(&request, "resourceUri")?;
            vec![
                user(json!({"type": "resource", "resource": {
                    "uri": uri, "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."
                }})),
                user_text("Please process the embedded resource above."),
            ]
        }
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": PNG_BASE64, "mimeType": "image/png"})),
            user_text("Please analyze the image above."),
        ],
        input_required::PROMPT => {
            return input_required::get_prompt(
                request.input_responses,
                request.request_state,
                &context,
            )
            .await;
        }
        _ if added => vec![user_text(&format!("This is {}.", request.name))],
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt {other:?}"),
                None,
            ));
        }
    };
    let result: rmcp::model::GetPromptResult =
        from_json("the prompt", complete(json!({"messages": messages})))?;
    Ok(result.into())
}

pub fn completion(request: &CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
    let candidates: &[&str] = match (&request.r#ref, request.argument.name.as_str()) {
        (Reference::Prompt(prompt), "arg1") if prompt.name == "test_prompt_with_arguments" => {
            ARG1_VALUES
        }
        (Reference::Resource(resource), "id") if resource.uri == super::resources::TEMPLATE => {
            ID_VALUES
        }
        _ => &[],
    };
    let typed = request.argument.value.as_str();
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|value| value.starts_with(typed))
        .collect();
    from_json(
        "the completion",
        complete(
            json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}),
        ),
    )
}
