//! A flow's `args` string split into words the way a POSIX shell splits a command line
//! (without expansion): blanks separate words; 'single quotes' keep everything
//! literally; "double quotes" keep everything but `\"`, `\\` (and `\$`, `` \` ``),
//! which lose their backslash; a backslash outside quotes keeps the next character.
//! Written here (a few lines) rather than taken as a dependency: nothing else is needed.

/// The most words one `args` string may hold (as many as a third-party request may
/// carry, `wire::MAX_THIRD_PARTY_ARGS`, with room).
pub const MAX_WORDS: usize = 256;

/// Split `s`; an unclosed quote or a trailing backslash is an error (one phrase).
pub fn split(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("a ' quote is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err("a \" quote is not closed".into()),
                        },
                        Some(c) => cur.push(c),
                        None => return Err("a \" quote is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => cur.push(c),
                    None => return Err("it ends with a lone backslash".into()),
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
        if words.len() >= MAX_WORDS {
            return Err(format!("more than {MAX_WORDS} words"));
        }
    }
    if in_word {
        words.push(cur);
    }
    if words.len() > MAX_WORDS {
        return Err(format!("more than {MAX_WORDS} words"));
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn words_quotes_and_escapes() {
        assert_eq!(split("").unwrap(), Vec::<String>::new());
        assert_eq!(split("  -u\t-b 10M \n").unwrap(), ["-u", "-b", "10M"]);
        assert_eq!(split("-T 'a b' x").unwrap(), ["-T", "a b", "x"]);
        assert_eq!(
            split(r#"-T "say \"hi\" \n""#).unwrap(),
            ["-T", r#"say "hi" \n"#]
        );
        assert_eq!(split(r"a\ b c").unwrap(), ["a b", "c"]);
        assert_eq!(split("''").unwrap(), [""]);
        assert_eq!(split("x'y'\"z\"").unwrap(), ["xyz"]);
        assert!(split("'open").unwrap_err().contains("' quote"));
        assert!(split("\"open").unwrap_err().contains("\" quote"));
        assert!(split("x\\").unwrap_err().contains("backslash"));
        assert!(split(&"a ".repeat(300)).unwrap_err().contains("256"));
    }
}
