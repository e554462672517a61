#![allow(clippy::unwrap_used)]

use rmcp::model::{CallToolResponse, ErrorCode, InputRequest, InputResponses, JsonObject};
use serde_json::{Value, json};

use super::{ANSWER_KEY, Args, Kind, Question, TAMPERED, retry_or_ask};

fn question(arguments: Value) -> Result<Question, String> {
    let map: JsonObject = serde_json::from_value(arguments).unwrap();
    Question::from_arguments(&Args {
        tool: "ask",
        map: &map,
    })
}

fn colour() -> Question {
    question(json!({"message": "favourite colour?"})).unwrap()
}

fn answers(answer: Value) -> Option<InputResponses> {
    Some(InputResponses::from([(ANSWER_KEY.to_owned(), answer)]))
}

/// The `InputRequiredResult` a response must be, as JSON.
fn input_required(response: CallToolResponse) -> Value {
    match response {
        CallToolResponse::InputRequired(result) => serde_json::to_value(result).unwrap(),
        other => panic!("expected an InputRequiredResult, got {other:?}"),
    }
}

fn complete_text(response: CallToolResponse) -> String {
    match response {
        CallToolResponse::Complete(result) => {
            assert_ne!(result.is_error, Some(true));
            result.content[0].as_text().unwrap().text.clone()
        }
        other => panic!("expected a result, got {other:?}"),
    }
}

#[test]
fn arguments_pick_the_kind_and_name_what_is_wrong() {
    assert_eq!(colour().kind, Kind::Elicit);
    let sample = question(json!({"message": "m", "kind": "sample"})).unwrap();
    assert_eq!(sample.kind, Kind::Sample);
    let missing = question(json!({})).unwrap_err();
    assert!(missing.contains("missing argument `message`"), "{missing}");
    let bad = question(json!({"message": "m", "kind": "shout"})).unwrap_err();
    assert!(bad.contains("`kind`"), "{bad}");
}

#[test]
fn the_request_state_encodes_kind_and_message() {
    assert_eq!(
        question(json!({"message": "hi é"}))
            .unwrap()
            .request_state(),
        "ask:elicit:686920c3a9"
    );
    let sample = question(json!({"message": "hi é", "kind": "sample"})).unwrap();
    assert_eq!(sample.request_state(), "ask:sample:686920c3a9");
}

#[test]
fn the_first_call_asks_with_an_elicitation_under_answer() {
    let asked = input_required(retry_or_ask(&colour(), None, None).unwrap());
    assert_eq!(
        asked,
        json!({
            "resultType": "input_required",
            "inputRequests": {"answer": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "favourite colour?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"answer": {"type": "string"}},
                        "required": ["answer"]
                    }
                }
            }},
            "requestState": colour().request_state()
        })
    );
}

#[test]
fn a_sample_question_asks_for_one_user_message() {
    let sample = question(json!({"message": "say hi", "kind": "sample"})).unwrap();
    assert!(matches!(
        sample.input_request().unwrap(),
        InputRequest::CreateMessage(_)
    ));
    let asked = input_required(retry_or_ask(&sample, None, None).unwrap());
    let request = &asked["inputRequests"]["answer"];
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(
        request["params"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "say hi"}}])
    );
    assert_eq!(request["params"]["maxTokens"], 100);
}

#[test]
fn the_retry_returns_the_answer_as_json_text() {
    let answer = json!({"action": "accept", "content": {"answer": "blue"}});
    let state = Some(colour().request_state());
    let response = retry_or_ask(&colour(), answers(answer.clone()), state).unwrap();
    let text = complete_text(response);
    assert_eq!(text, r#"{"action":"accept","content":{"answer":"blue"}}"#);
}

#[test]
fn a_retry_without_the_answer_asks_again() {
    let state = Some(colour().request_state());
    let other = Some(InputResponses::from([("other".to_owned(), json!({}))]));
    for responses in [None, other] {
        let again = input_required(retry_or_ask(&colour(), responses, state.clone()).unwrap());
        assert_eq!(
            again,
            input_required(retry_or_ask(&colour(), None, None).unwrap())
        );
    }
}

#[test]
fn a_foreign_or_missing_request_state_is_invalid_params() {
    let answer = json!({"action": "accept", "content": {"answer": "blue"}});
    let cases = [
        Some("ask:elicit:00".to_owned()),
        // The state of another question.
        Some(question(json!({"message": "x"})).unwrap().request_state()),
        Some(String::new()),
        None,
    ];
    for state in cases {
        let error = retry_or_ask(&colour(), answers(answer.clone()), state.clone()).unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{state:?}");
        assert_eq!(error.message, TAMPERED);
    }
}
