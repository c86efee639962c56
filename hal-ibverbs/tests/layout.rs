//! Layout of every C struct this crate reads or writes, against the
//! installed `<infiniband/verbs.h>` (`libibverbs-dev`): a C program prints
//! each `sizeof`/`offsetof`/`_Alignof` of `udah_hal_ibverbs::ffi::layout_facts`
//! and the values must match the Rust ones. Needs a C compiler and the
//! headers; fails loudly without them.

use core::fmt::Write as _;
use std::process::Command;

use udah_hal_ibverbs::ffi::{Relation, layout_facts};

#[test]
fn layouts_match_installed_headers() {
    let header = std::path::Path::new("/usr/include/infiniband/verbs.h");
    assert!(header.exists(), "{} missing: install libibverbs-dev", header.display());
    let facts = layout_facts();
    let mut c =
        String::from("#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\nint main(void) {\n");
    for f in facts {
        writeln!(c, "    printf(\"%zu\\n\", (size_t)({}));", f.c_expr).unwrap();
    }
    c.push_str("    return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("udah-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, &c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}"));
    assert!(out.status.success(), "compiling the layout probe failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let values: Vec<usize> = String::from_utf8_lossy(&run.stdout).lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(values.len(), facts.len());
    let mut bad = Vec::new();
    for (f, c) in facts.iter().zip(&values) {
        let ok = match f.relation {
            Relation::Eq => f.rust == *c,
            Relation::AtLeast => f.rust >= *c,
        };
        if !ok {
            bad.push(format!("{}: C {c}, Rust {} ({:?})", f.c_expr, f.rust, f.relation));
        }
    }
    assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
    assert!(facts.len() >= 70, "every struct the crate touches is listed");
}
