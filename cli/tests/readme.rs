//! The workspace README's Rust examples are doctested where they are
//! published: in `core/README.md`, which `udah-core` includes for its
//! doctests. This keeps the two copies the same.

mod common;

/// The ```rust blocks of a Markdown text.
fn rust_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```rust") => current = Some(String::new()),
            (Some(b), "```") => {
                blocks.push(core::mem::take(b));
                current = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unterminated ```rust block");
    blocks
}

#[test]
fn workspace_readme_examples_are_the_doctested_ones() {
    let root = common::workspace_root();
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let workspace = rust_blocks(&read("README.md"));
    let doctested = rust_blocks(&read("core/README.md"));
    assert!(workspace.len() >= 2, "the README's Use and AH-table examples");
    for (i, b) in workspace.iter().enumerate() {
        assert!(
            doctested.contains(b),
            "README.md's Rust block {} is not in core/README.md (copy it there):\n{b}",
            i + 1
        );
    }
}
