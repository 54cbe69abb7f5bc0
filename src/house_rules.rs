//! Two of the house's rules (issue 21), checked on every `src/**/*.rs` by `cargo test`:
//!
//! * no function over [`MAX_FN_LINES`] lines, from its `fn` line to its closing brace;
//! * the host's clocks (`Instant::now()`, `SystemTime::now()`) are read only in the
//!   clock's home (`src/clock.rs`) and the platform layer (`src/sock/`): everything else
//!   is given a `Clock` or a `now`.
//!
//! The sources are read as Rust, not as text: comments, strings (raw, byte and C
//! strings too) and character literals are blanked first, so a `fn` or a
//! `Instant::now()` quoted in a doc comment or a string is not counted.
//!
//! [`ALLOWED`] lists the files other work was still changing when the rules came in;
//! an entry that is no longer needed fails the check too, so the list only shrinks.

use std::path::{Path, PathBuf};

/// The longest a function may be, in lines.
const MAX_FN_LINES: usize = 150;

/// Reads of the host's clocks are at home here (paths under `src/`; a trailing `/` is a
/// folder).
const CLOCK_HOMES: &[&str] = &["clock.rs", "sock/"];

/// Which rule an allow-list entry waives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Clock,
    Length,
}

/// Files allowed to break a rule while they are being rewritten (none today; an entry
/// no longer needed fails the check).
const ALLOWED: &[(&str, Rule)] = &[];

/// One rule broken at one place.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Breach {
    rule: Rule,
    line: usize,
    what: String,
}

/// `src` with every comment, string literal and character literal replaced by spaces,
/// newlines kept, so positions and line numbers stay those of the source.
fn blank_non_code(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, s: &[char]| {
        out.extend(s.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }))
    };
    let mut i = 0;
    while i < c.len() {
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        let end = if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len())
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            block_comment_end(&c, i)
        } else if c[i] == '"' {
            quoted_end(&c, i + 1, '"')
        } else if !ident_before && let Some(e) = prefixed_string_end(&c, i) {
            e
        } else if c[i] == '\'' {
            char_literal_end(&c, i).unwrap_or(i + 1)
        } else {
            out.push(c[i]);
            i += 1;
            continue;
        };
        let end = end.min(c.len());
        blank(&mut out, &c[i..end]);
        i = end;
    }
    out
}

/// The end (one past) of the `/* */` comment at `i`, which may nest.
fn block_comment_end(c: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    c.len()
}

/// The end (one past the closing `close`) of an escaped literal whose body starts at `i`.
fn quoted_end(c: &[char], mut i: usize, close: char) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            ch if ch == close => return i + 1,
            _ => i += 1,
        }
    }
    c.len()
}

/// A string with a prefix at `i` (`b"`, `c"`, `r"`, `r#"`, `br#"`, `cr"`): its end.
fn prefixed_string_end(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(c.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if c.get(j) == Some(&'r') {
        let hashes = c[j + 1..].iter().take_while(|&&ch| ch == '#').count();
        let open = j + 1 + hashes;
        if c.get(open) != Some(&'"') {
            return None;
        }
        let closing: Vec<char> = std::iter::once('"')
            .chain(std::iter::repeat_n('#', hashes))
            .collect();
        let body = open + 1;
        let found = (body..c.len()).find(|&k| c[k..].starts_with(&closing));
        return Some(found.map_or(c.len(), |k| k + closing.len()));
    }
    if j > i && c.get(j) == Some(&'"') {
        return Some(quoted_end(c, j + 1, '"'));
    }
    if j > i && c[i] == 'b' && c.get(j) == Some(&'\'') {
        return char_literal_end(c, j);
    }
    None
}

/// The end of the character literal at `i` (a `'`), or `None` for a lifetime or label.
fn char_literal_end(c: &[char], i: usize) -> Option<usize> {
    match c.get(i + 1)? {
        '\\' => Some(quoted_end(c, i + 1, '\'')),
        _ if c.get(i + 2) == Some(&'\'') => Some(i + 3),
        _ => None,
    }
}

/// Each function of the blanked source `code` with a body: its name, the line of its
/// `fn` (1-based) and how many lines it spans.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let c: Vec<char> = code.chars().collect();
    let line_at = |i: usize| 1 + c[..i].iter().filter(|&&ch| ch == '\n').count();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    for i in 0..c.len().saturating_sub(2) {
        let word = c[i] == 'f' && c[i + 1] == 'n' && c[i + 2].is_whitespace();
        if !word || (i > 0 && ident(c[i - 1])) {
            continue;
        }
        let name_at = (i + 2..c.len()).find(|&j| !c[j].is_whitespace());
        let Some(name_at) = name_at.filter(|&j| ident(c[j])) else {
            continue; // `fn(..)`: a function pointer type
        };
        let name: String = c[name_at..].iter().take_while(|&&ch| ident(ch)).collect();
        // The body opens at the first `{` outside parentheses and brackets; a `;`
        // there first is a declaration without one.
        let mut depth = 0i32;
        let mut open = None;
        for (j, &ch) in c.iter().enumerate().skip(name_at) {
            match ch {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => break,
                '{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut braces = 0i32;
        let close = (open..c.len()).find(|&j| {
            match c[j] {
                '{' => braces += 1,
                '}' => braces -= 1,
                _ => {}
            }
            braces == 0
        });
        let close = close.unwrap_or(c.len() - 1);
        let first = line_at(i);
        out.push((name, first, line_at(close) - first + 1));
    }
    out
}

/// The rules `src` (the file `rel` under `src/`) breaks.
fn breaches(rel: &str, src: &str) -> Vec<Breach> {
    let code = blank_non_code(src);
    let mut out = Vec::new();
    for (name, line, len) in functions(&code) {
        if len > MAX_FN_LINES {
            out.push(Breach {
                rule: Rule::Length,
                line,
                what: format!("fn {name} is {len} lines (at most {MAX_FN_LINES})"),
            });
        }
    }
    let home = CLOCK_HOMES
        .iter()
        .any(|h| rel == *h || (h.ends_with('/') && rel.starts_with(h)));
    if !home {
        for (n, l) in code.lines().enumerate() {
            let squeezed: String = l.chars().filter(|ch| !ch.is_whitespace()).collect();
            for read in ["Instant::now", "SystemTime::now"] {
                // Called, or passed as a function (`unwrap_or_else(Instant::now)`).
                let at = squeezed.match_indices(read).map(|(k, _)| k + read.len());
                let named = |k: usize| {
                    squeezed[k..].starts_with(|ch: char| ch.is_alphanumeric() || ch == '_')
                };
                if at.into_iter().any(|k| !named(k)) {
                    out.push(Breach {
                        rule: Rule::Clock,
                        line: n + 1,
                        what: format!("{read}() outside the clock's home: take a Clock or `now`"),
                    });
                }
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_long_functions_and_the_clock_read_only_at_its_home() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    assert!(
        files.len() > 50,
        "found only {} files under src/",
        files.len()
    );
    let mut broken = Vec::new();
    let mut used = vec![false; ALLOWED.len()];
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let src = std::fs::read_to_string(f).unwrap();
        for b in breaches(&rel, &src) {
            match ALLOWED.iter().position(|&(p, r)| p == rel && r == b.rule) {
                Some(k) => used[k] = true,
                None => broken.push(format!("src/{rel}:{}: {}", b.line, b.what)),
            }
        }
    }
    for (k, (p, r)) in ALLOWED.iter().enumerate() {
        if !used[k] {
            broken.push(format!(
                "src/{p} keeps the {r:?} rule now: remove it from house_rules::ALLOWED"
            ));
        }
    }
    assert!(
        broken.is_empty(),
        "house rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn comments_strings_and_char_literals_hide_what_they_quote() {
    let src = r####"
// fn in_a_comment() { Instant::now() }
/* outer /* fn nested() {} */ Instant::now() */
fn real<'a>(x: &'a str) -> char {
    let _ = "fn in_a_string() { \" SystemTime::now() }";
    let _ = r#"fn raw() { "Instant::now()" }"#;
    let _ = br"fn bytes() {}";
    let _ = b'{';
    let _ = '\'';
    let _: fn(u8) -> u8 = |v| v;
    '}'
}
trait T { fn declared(&self); }
"####;
    let code = blank_non_code(src);
    assert_eq!(code.lines().count(), src.lines().count());
    let fns = functions(&code);
    assert_eq!(fns, [("real".to_string(), 4, 9)]);
    assert!(
        breaches("x.rs", src).is_empty(),
        "{:?}",
        breaches("x.rs", src)
    );
}

#[test]
fn a_long_function_and_a_clock_read_are_caught() {
    let body = "    let _x = 1;\n".repeat(MAX_FN_LINES - 1);
    let long = format!("fn long() {{\n{body}}}\nfn ok() {{}}\n");
    let b = breaches("engine/x.rs", &long);
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!((b[0].rule, b[0].line), (Rule::Length, 1));
    assert!(breaches("engine/x.rs", &long.replacen("    let _x = 1;\n", "", 1)).is_empty());
    let read = "fn f() -> std::time::Instant {\n    std::time::Instant :: now ()\n}\n";
    let b = breaches("engine/x.rs", read);
    assert_eq!((b.len(), b[0].rule, b[0].line), (1, Rule::Clock, 2));
    let passed =
        "fn g(t: Option<SystemTime>) -> SystemTime {\n    t.unwrap_or_else(SystemTime::now)\n}\n";
    assert_eq!(breaches("x.rs", passed).len(), 1);
    assert!(breaches("x.rs", "fn h() { Instant::now_or_later(); }").is_empty());
    assert!(breaches("clock.rs", read).is_empty());
    assert!(breaches("sock/mmsg.rs", read).is_empty());
}
