//! Display-safe text from strings a peer chose: RSA user names, titles, extra data,
//! error sentences, the server output a client prints with `--get-server-output`.
//!
//! A raw ESC or BEL in such a string reaches the operator's terminal (colours, cursor
//! moves, a rewritten title bar), a CR or U+2028 forges a second log line, and bidi
//! overrides reorder what the eye reads. Every place where a peer-chosen string reaches
//! the server's text log or the client's terminal goes through [`escape_controls`], the
//! one function that decides what is shown raw. Escapes look like Rust's: `\x1b`, `\r`,
//! `\u{2028}`. They are for display only: a backslash is not itself escaped, so the
//! text cannot be decoded back exactly (the JSON outputs carry the raw string).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Which line structure the text may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// One log line: every control character is escaped, newlines and tabs included.
    One,
    /// Multi-line text (the server's output shown by a client): `\n` and `\t` stay.
    Many,
}

/// Characters outside C0/C1/DEL that still change what a reader sees: the line and
/// paragraph separators, and the bidirectional overrides, embeddings, isolates and
/// marks (CVE-2021-42574, "Trojan Source").
fn invisible_format(c: char) -> bool {
    matches!(c,
        '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

fn needs_escape(c: char, lines: Lines) -> bool {
    match c {
        '\n' | '\t' => lines == Lines::One,
        c => c.is_control() || invisible_format(c),
    }
}

/// `s` with its control and invisible formatting characters escaped (borrowed back
/// untouched when there is none).
pub fn escape_controls(s: &str, lines: Lines) -> Cow<'_, str> {
    if !s.chars().any(|c| needs_escape(c, lines)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs_escape(c, lines) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for s in ["alice", "Ünïcødé 名前 ✓", "a \"quoted\" \\ path", ""] {
            assert!(matches!(escape_controls(s, Lines::One), Cow::Borrowed(x) if x == s));
        }
        let multi = "line 1\n\tline 2\n";
        assert_eq!(escape_controls(multi, Lines::Many), multi);
    }

    #[test]
    fn terminal_and_line_controls_are_shown_not_obeyed() {
        assert_eq!(
            escape_controls("ev\x1b[31mil\x07\u{2028}x\r\ny", Lines::One),
            "ev\\x1b[31mil\\x07\\u{2028}x\\r\\ny"
        );
        assert_eq!(escape_controls("a\tb\0\x7f", Lines::One), "a\\tb\\x00\\x7f");
        // C1 controls (NEL, CSI) and bidi overrides.
        assert_eq!(
            escape_controls("\u{85}\u{9b}2J\u{202e}cba\u{2066}", Lines::One),
            "\\u{85}\\u{9b}2J\\u{202e}cba\\u{2066}"
        );
        // Multi-line text keeps its lines, but not a carriage return or an escape.
        assert_eq!(
            escape_controls("ok\n\x1b]0;title\x07\r\n", Lines::Many),
            "ok\n\\x1b]0;title\\x07\\r\n"
        );
    }

    #[test]
    fn no_control_survives_any_input() {
        // Every char of the first two planes, alone and between letters.
        let all: String = (0u32..0x2_0000).filter_map(char::from_u32).collect();
        for lines in [Lines::One, Lines::Many] {
            let out = escape_controls(&all, lines);
            let kept = |c: char| lines == Lines::Many && (c == '\n' || c == '\t');
            assert!(
                !out.chars()
                    .any(|c| (c.is_control() && !kept(c)) || matches!(c, '\u{2028}' | '\u{202e}')),
                "{lines:?} left a control"
            );
            let kept_newlines = out.matches('\n').count();
            assert_eq!(kept_newlines, if lines == Lines::One { 0 } else { 1 });
        }
    }
}
