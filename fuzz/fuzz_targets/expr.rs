//! The `if:` expression language: parse any text, and evaluate what parses.
//!
//! Input: the expression text (UTF-8; other inputs are skipped). Checked: no panic (deep
//! nesting included); an error's offset and column lie within the text; each reference of a
//! parsed expression lies within the text; evaluating with every variable of `vars()`
//! defined (to values that look like syntax) never fails, nor does an expression without
//! variables.
#![no_main]

use aw::run::Vars;
use aw::run::expr::Expr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Expr::parse(text) {
        Err(e) => {
            assert!(e.offset <= text.len(), "offset {} past the text", e.offset);
            assert!(e.column(text) <= text.chars().count() + 1);
            assert!(!e.message.is_empty());
        }
        Ok(expr) => {
            assert_eq!(expr.text(), text);
            let names = expr.vars();
            let mut vars = Vars::new();
            for (i, (name, at)) in names.iter().enumerate() {
                assert!(*at < text.len(), "reference offset {at} past the text");
                // Values that look like syntax stay values.
                let v = [
                    "", "0", "false", "true", "a == b", "${{ x }}", "\"", "x || y",
                ];
                vars.set(name, v[i % v.len()]);
            }
            expr.eval(&vars).expect("every variable is defined");
            if names.is_empty() {
                expr.eval(&Vars::new()).expect("no variable is read");
            }
        }
    }
});
