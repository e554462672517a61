//! Text that is safe to put into generated code: string literals and doc comments.

/// `text` as a double-quoted JS string literal, ASCII only: `"` and `\` are escaped, every other
/// character outside printable ASCII becomes `\uXXXX` (UTF-16 units). Nothing in it can end the
/// string, a line, a comment or a template, whatever `text` holds.
pub(crate) fn string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// Whether `c` reorders text on screen (bidi controls), so that code would read differently
/// from how it runs.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The lines of `text`, each safe inside a `/** … */` comment: `*/` cannot close it, control
/// characters are dropped (a tab becomes a space) and bidi controls are shown as `\u202e`.
/// Every JS line terminator (`\r`, U+2028, U+2029) starts a new line.
pub(crate) fn comment_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' | '\u{2028}' | '\u{2029}' => lines.push(std::mem::take(&mut line)),
            '\t' => line.push(' '),
            '/' if line.ends_with('*') => line.push_str("\\/"),
            c if is_bidi_control(c) => line.push_str(&format!("\\u{:04x}", c as u32)),
            c if c.is_control() => {}
            c => line.push(c),
        }
    }
    lines.push(line);
    lines
        .into_iter()
        .map(|line| line.trim_end().to_owned())
        .collect()
}

/// A `/** … */` block from paragraphs (empty ones are skipped, a blank line goes between the
/// rest), indented by `indent` spaces. Empty when there is nothing to say.
pub(crate) fn doc_comment(paragraphs: &[String], indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut body: Vec<String> = Vec::new();
    for paragraph in paragraphs {
        let mut lines = comment_lines(paragraph.trim());
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        if lines.is_empty() {
            continue;
        }
        if !body.is_empty() {
            body.push(String::new());
        }
        body.extend(lines);
    }
    match body.as_slice() {
        [] => String::new(),
        [one] => format!("{pad}/** {one} */\n"),
        lines => {
            let mut out = format!("{pad}/**\n");
            for line in lines {
                if line.is_empty() {
                    out.push_str(&format!("{pad} *\n"));
                } else {
                    out.push_str(&format!("{pad} * {line}\n"));
                }
            }
            out.push_str(&format!("{pad} */\n"));
            out
        }
    }
}
