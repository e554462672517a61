//! Lookalike tool names: a new tool whose name a reader (or a model) cannot tell from a pinned
//! one's. Two names look alike when their *skeletons* are equal: each character folded to a
//! representative of the characters it is confused with. The fold is a small written-down table in
//! the spirit of Unicode's confusables (UTS #39), not the whole of it:
//!
//! - case (`Read_File`, `READ_FILE`) and fullwidth forms (`ｒｅａｄ`);
//! - Cyrillic and Greek letters drawn like Latin ones (`rеad` with a Cyrillic `е`), the dotless
//!   `ı`, and characters with a combining mark dropped (`réad`);
//! - shapes told apart by a font alone: `l`, `1`, `I`, `|` are one; `0` and `o`; `rn` and `m`;
//!   `vv` and `w`;
//! - invisible characters (zero-width spaces and joiners, soft hyphens, bidi controls, variation
//!   selectors, tag characters) are dropped;
//! - separators (`_`, `-`, `.`, `/`, spaces and other dashes) are dropped, so `read_file`,
//!   `read-file`, `read.file` and `readfile` are one.
//!
//! A false alarm costs a person one `runbyte pins approve`; a miss lets a renamed tool pass as
//! the trusted one, so the fold leans wide.

use std::collections::HashMap;

/// The skeleton of `name`: what it looks like, whatever the characters that draw it.
pub fn skeleton(name: &str) -> String {
    let mut folded = String::with_capacity(name.len());
    for c in name.chars() {
        if invisible(c) || separator(c) {
            continue;
        }
        match fold(c) {
            Some(to) => folded.push_str(to),
            None => folded.extend(c.to_lowercase()),
        }
    }
    // Pairs drawn like one letter, once every letter is folded.
    folded.replace("rn", "m").replace("vv", "w")
}

/// The pinned names each skeleton belongs to, for [`resembles`].
pub struct Skeletons(HashMap<String, Vec<String>>);

impl Skeletons {
    pub fn of<'a>(names: impl IntoIterator<Item = &'a String>) -> Skeletons {
        let mut map: HashMap<String, Vec<String>> = HashMap::new();
        for name in names {
            map.entry(skeleton(name)).or_default().push(name.clone());
        }
        Skeletons(map)
    }

    /// The pinned name `name` looks like and is not, if any.
    pub fn resembles(&self, name: &str) -> Option<&str> {
        self.0
            .get(&skeleton(name))?
            .iter()
            .find(|pinned| *pinned != name)
            .map(String::as_str)
    }
}

fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
        // Combining marks: `é` written as `e` and U+0301 is `e`.
        || matches!(c, '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}'
            | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}')
}

fn separator(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '_' | '-' | '.' | '/' | ':' | '·' | '‐'
                ..='―'
                    | '⁃'
                    | '−'
                    | '﹘'
                    | '﹣'
                    | '－'
                    | '＿'
                    | '．'
                    | '・'
                    | '･'
                    | '‿'
                    | '⁀'
                    | '⁔'
                    | '︳'
                    | '︴'
                    | '﹍'
                    | '﹎'
                    | '﹏'
        )
}

/// The representative of a character confused with others; `None`: itself, lowercased.
fn fold(c: char) -> Option<&'static str> {
    // Fullwidth ASCII is ASCII.
    let c = match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    };
    Some(match c {
        // One vertical stroke.
        'l' | 'L' | 'i' | 'I' | '1' | '|' | 'ı' | 'ǀ' | 'ℓ' | 'ⅰ' | 'Ⅰ' | 'ⅼ' | 'Ⅼ' | 'ɩ' | 'ɪ'
        | 'ι' | 'Ι' | 'ί' | 'ϊ' | 'і' | 'І' | 'ї' | 'Ї' | 'Ӏ' | 'ӏ' | 'ǐ' | 'í' | 'ì' | 'ï'
        | 'î' | 'ĺ' | 'ļ' | 'ľ' | 'ŀ' | 'ł' | '׀' | 'ו' | 'ן' | 'ا' | '∣' | '❘' | '│' | 'ꓲ'
        | 'ꓡ' => "l",
        // One ring.
        'o' | 'O' | '0' | 'ο' | 'Ο' | 'о' | 'О' | 'σ' | 'ӧ' | 'օ' | 'ℴ' | 'ᴏ' | 'ᴑ' | 'ọ' | 'ö'
        | 'ó' | 'ò' | 'ô' | 'õ' | 'ø' | 'Ø' | '〇' | '○' | 'ⲟ' | 'Ⲟ' | 'ꓳ' => "o",
        'a' | 'A' | 'а' | 'А' | 'α' | 'Α' | 'ɑ' | 'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ӓ' | 'ꓮ' => {
            "a"
        }
        'b' | 'B' | 'Ь' | 'в' | 'В' | 'β' | 'Β' | 'ʙ' | 'ꓐ' => "b",
        'c' | 'C' | 'с' | 'С' | 'ϲ' | 'Ϲ' | 'ᴄ' | 'ç' | 'ⅽ' | 'Ⅽ' | 'ꓚ' => "c",
        'd' | 'D' | 'ԁ' | 'ⅾ' | 'Ⅾ' | 'ꓓ' => "d",
        'e' | 'E' | 'е' | 'Е' | 'ε' | 'Ε' | 'ё' | 'Ё' | 'ҽ' | 'è' | 'é' | 'ê' | 'ë' | 'ℯ' | 'ꓰ' => {
            "e"
        }
        'f' | 'F' | 'ϝ' | 'Ϝ' | 'ꓝ' => "f",
        'g' | 'G' | 'ɡ' | 'ց' | 'ԍ' | 'ꓖ' => "g",
        'h' | 'H' | 'һ' | 'Һ' | 'н' | 'Н' | 'η' | 'Η' | 'ꓧ' => "h",
        'j' | 'J' | 'ј' | 'Ј' | 'ϳ' | 'ꓙ' => "j",
        'k' | 'K' | 'к' | 'К' | 'κ' | 'Κ' | 'K' | 'ꓗ' => "k",
        'm' | 'M' | 'м' | 'М' | 'μ' | 'Μ' | 'ⅿ' | 'Ⅿ' | 'ꓟ' => "m",
        'n' | 'N' | 'п' | 'ո' | 'Ν' | 'ꓠ' | 'ñ' => "n",
        'p' | 'P' | 'р' | 'Р' | 'ρ' | 'Ρ' | 'ᴘ' | 'ꓑ' => "p",
        'q' | 'Q' | 'ԛ' | 'զ' => "q",
        'r' | 'R' | 'г' | 'ᴦ' | 'ꓣ' => "r",
        's' | 'S' | 'ѕ' | 'Ѕ' | 'ꜱ' | 'ꓢ' => "s",
        't' | 'T' | 'т' | 'Т' | 'τ' | 'Τ' | 'ꓔ' => "t",
        'u' | 'U' | 'υ' | 'ս' | 'ü' | 'ú' | 'ù' | 'û' | 'ᴜ' | 'ꓴ' => "u",
        'v' | 'V' | 'ν' | 'ѵ' | 'Ѵ' | 'ⅴ' | 'Ⅴ' | 'ᴠ' | 'ꓦ' => "v",
        'w' | 'W' | 'ѡ' | 'ԝ' | 'ա' | 'ᴡ' | 'ꓪ' => "w",
        'x' | 'X' | 'х' | 'Х' | 'χ' | 'Χ' | 'ⅹ' | 'Ⅹ' | 'ꓫ' => "x",
        'y' | 'Y' | 'у' | 'У' | 'γ' | 'Υ' | 'ү' | 'Ү' | 'ý' | 'ÿ' | 'ꓬ' => "y",
        'z' | 'Z' | 'ᴢ' | 'Ζ' | 'ꓜ' => "z",
        '2' | 'ᒿ' => "2",
        '3' | 'З' | 'з' | 'Ӡ' | 'ӡ' => "3",
        '5' | 'Ƽ' => "5",
        '6' | 'б' => "6",
        '8' | 'Ȣ' | 'ȣ' => "8",
        _ => return None,
    })
}
