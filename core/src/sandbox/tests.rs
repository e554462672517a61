#![allow(clippy::unwrap_used)]

use super::{
    ErrorKind, MAX_NESTING, MAX_SOURCE_BYTES,
    engine::{human_bytes, human_duration},
    transpile,
    transpile::{
        INLINE_CHAIN, INLINE_NESTING, INLINE_OPENED, INLINE_SOURCE_BYTES, Shape, check_shape,
        guarded, transpile_as,
    },
};

#[test]
fn strips_types_and_keeps_positions() {
    let source = "interface Args { a: number }\n\
                  const x: Args = { a: 1 };\n\
                  \n\
                  export async function exec(): Promise<number> {\n\
                  \x20 return x.a as number;\n\
                  }\n";
    let out = transpile_as(source, "agent.ts", true).unwrap();
    assert!(!out.code().contains("interface"), "{}", out.code());
    assert!(!out.code().contains(": number"), "{}", out.code());
    assert!(out.has_exec());
    assert!(out.code().contains("__runbyte_exec"), "{}", out.code());
    // `return` in the generated code maps to line 5 of the source.
    let (line, text) = out
        .code()
        .split('\n')
        .enumerate()
        .find(|(_, l)| l.contains("return"))
        .unwrap();
    let column = text.find("return").unwrap() as u32 + 1;
    assert_eq!(out.original_position(line as u32 + 1, column), Some((5, 3)));
}

#[test]
fn plain_transpile_exports_nothing_extra() {
    let out = transpile("async function exec() { return 1 }", "x.ts").unwrap();
    assert!(out.has_exec());
    assert!(!out.code().contains("__runbyte_exec"));
}

#[test]
fn javascript_modules_pass() {
    let source =
        "/** @param {{a: number}} args */\nexport async function f(args) { return args.a < 2 }\n";
    let out = transpile(source, "/servers/demo/f.js").unwrap();
    assert!(
        out.code().contains("export async function f"),
        "{}",
        out.code()
    );
}

#[test]
fn syntax_errors_carry_positions() {
    let error = transpile("const a = 1;\nconst b: number = ;\n", "agent.ts").unwrap_err();
    assert_eq!(error.kind, ErrorKind::Syntax);
    assert_eq!(error.position, Some((2, 19)), "{error:?}");
}

#[test]
fn refuses_what_would_crash_the_parser() {
    let deep = "(".repeat(100_000);
    let error = transpile(&deep, "agent.ts").unwrap_err();
    assert_eq!(error.kind, ErrorKind::Syntax);
    assert!(error.message.contains("256 levels"), "{}", error.message);
    assert_eq!(error.position, Some((1, MAX_NESTING as u32 + 1)));

    let ok = format!("const x = {}1{};", "(".repeat(200), ")".repeat(200));
    transpile(&ok, "agent.ts").unwrap();

    let big = "x".repeat(MAX_SOURCE_BYTES + 1);
    assert!(
        transpile(&big, "agent.ts")
            .unwrap_err()
            .message
            .contains("1 MiB")
    );

    let chain = format!("const x = 1{};", " + 1".repeat(2_000));
    let error = transpile(&chain, "agent.ts").unwrap_err();
    assert!(error.message.contains("operators"), "{}", error.message);

    // Brackets inside strings and comments do not count.
    let quoted = format!(
        "const s = \"{}\"; // {}\n",
        "(".repeat(1000),
        "[".repeat(1000)
    );
    transpile(&quoted, "agent.ts").unwrap();
    let template = format!("const t = `{}${{1}}`;", "{".repeat(1000));
    transpile(&template, "agent.ts").unwrap();
}

#[test]
fn pathological_shapes_under_the_caps_do_not_crash() {
    // Each just under the caps, each a deep tree: the large stack must carry it. Whether each
    // is accepted or refused does not matter; that the process survives does.
    let n = 1000;
    let shapes = [
        format!("const x = {}1;", "!".repeat(n)),
        format!("const x = {}1;", "- ".repeat(n)),
        format!("const x = {}1;", "typeof ".repeat(n)),
        format!("const x = {}X;", "new ".repeat(n)),
        format!("const x = {}1;", "await ".repeat(n)),
        format!("const x = a{};", ".b".repeat(n)),
        format!("const x = a{};", " in b".repeat(n)),
        format!("const x = 1{};", " + 1".repeat(n)),
        format!("const x = 1{};", " ** 1".repeat(n / 2)),
        format!("const x = a{};", " as any".repeat(n)),
        format!("const x = {}1{};", "[".repeat(256), "]".repeat(256)),
        format!("let a; a = {}1;", "a = ".repeat(n)),
        format!("const x = 1{};", " ? 1 : 1".repeat(n / 2)),
        format!(
            "type T = {}number{};",
            "Array<".repeat(250),
            ">".repeat(250)
        ),
        format!("type T = {}number;", "keyof ".repeat(n)),
        "if (a) ".repeat(n) + ";",
        "while (a) ".repeat(n) + ";",
        "a: ".repeat(n) + ";",
        "if (a) {} else ".repeat(n) + ";",
        "if (a) x; else ".repeat(n) + ";",
        format!(
            "x = {}{}1{};",
            "(".repeat(255),
            "!".repeat(n - 300),
            ")".repeat(255)
        ),
        format!("x = {}1{};", "({a: ".repeat(120), "})".repeat(120)),
        "!\n".repeat(20_000) + "1",
        "x\n.y".repeat(20_000),
    ];
    for shape in shapes {
        let started = std::time::Instant::now();
        let _ = transpile(&shape, "agent.ts");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?} took {:?}",
            &shape[..20],
            started.elapsed()
        );
    }
}

/// The deepest form of `make` that the host still transpiles on its async thread, past a floor
/// of `at_least` levels (so that the bound, not the form, is what stops it).
fn deepest_inline(make: &dyn Fn(usize) -> String, at_least: usize) -> String {
    let fits = |n| {
        let source = make(n);
        check_shape(&source).is_ok_and(|shape| shape.fits_inline(source.len()))
    };
    let mut n = 1;
    while fits(n + 1) {
        n += 1;
    }
    assert!(n >= at_least, "{:?} fits only {n} deep", &make(2));
    make(n)
}

/// Transpiles each source on a thread of `stack` bytes: a stack overflow aborts the test.
fn transpile_on_stack(sources: Vec<String>, stack: usize) -> usize {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            sources
                .iter()
                .filter(|source| guarded(source, "agent.ts", true).is_ok())
                .count()
        })
        .unwrap()
        .join()
        .unwrap()
}

/// What the host transpiles on its own async thread (2 MiB of stack, 8 MiB in `runbyte serve`)
/// must fit in far less: the deepest sources each bound admits, and a thousand generated ones,
/// transpile on a 768 KiB stack, in whatever profile the tests are built (a debug build's
/// frames are the larger: 16 nested parentheses or 32 nested `if`s take about 300 KiB there).
#[test]
fn small_shallow_sources_transpile_within_a_small_stack() {
    let forms: Vec<(&dyn Fn(usize) -> String, usize)> = vec![
        (&|n| format!("x = {}1{};", "(".repeat(n), ")".repeat(n)), 14),
        (&|n| format!("x = {}1{};", "[".repeat(n), "]".repeat(n)), 14),
        (
            &|n| format!("x = {}1{};", "({a: ".repeat(n / 2), "})".repeat(n / 2)),
            8,
        ),
        (
            &|n| format!("x = {}1{};", "f(() => ".repeat(n), ")".repeat(n)),
            14,
        ),
        (
            &|n| format!("x = {}1{};", "`${".repeat(n), "}`".repeat(n)),
            8,
        ),
        (
            &|n| format!("type T = {}number{};", "Array<".repeat(n), ">".repeat(n)),
            14,
        ),
        (&|n| format!("x = {}1;", "!".repeat(n)), 30),
        (&|n| format!("x = {}1;", "typeof ".repeat(n)), 30),
        (&|n| format!("x = 1{};", " + 1".repeat(n)), 30),
        (&|n| format!("x = a{};", " as any".repeat(n)), 30),
        (&|n| format!("x = 1{};", " ? 1 : 1".repeat(n)), 15),
        (&|n| "if (a) x; else ".repeat(n) + ";", 30),
        (&|n| "if (a) ".repeat(n) + ";", 30),
        // Chains that nest no bracket: bounded by the brackets opened.
        (&|n| format!("x = f{};", "()".repeat(n)), 250),
        (&|n| format!("x = a{};", "[0]".repeat(n)), 250),
        (&|n| format!("x = t{};", "``".repeat(n)), 250),
        // Nesting and chains at once: a chain at every level.
        (
            &|n| format!("x = {}1{};", "(!a + ".repeat(n), ")".repeat(n)),
            8,
        ),
        (
            &|n| format!("x = {}1{};", "f(a)(b)[c](".repeat(n), ")".repeat(n)),
            8,
        ),
        // Brackets to the nesting bound around statements to the chain bound.
        (
            &|n| {
                let ifs = "if (a) ".repeat(n) + ";";
                format!("{}() => {{ {ifs} }}{}", "(".repeat(14), ")".repeat(14))
            },
            24,
        ),
    ];
    let deepest: Vec<String> = forms
        .iter()
        .map(|(make, at_least)| deepest_inline(*make, *at_least))
        .collect();
    let count = deepest.len();
    assert_eq!(
        transpile_on_stack(deepest, 768 << 10),
        count,
        "each is a valid program"
    );

    // Generated: random expressions, kept when the host would transpile them on its thread.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    fn expression(depth: u32, next: &mut dyn FnMut(u64) -> u64) -> String {
        if depth == 0 || next(8) == 0 {
            return ["1", "a", "\"s\"", "f()", "[]", "{}"][next(6) as usize].to_owned();
        }
        let mut inner = || expression(depth - 1, next);
        let e = inner();
        match next(16) {
            0 => format!("({e})"),
            1 => format!("[{e}, 1]"),
            2 => format!("{{ a: {e} }}"),
            3 => format!("f({e})"),
            4 => format!("(() => ({e}))"),
            5 => format!("`x${{{e}}}`"),
            6 => format!("!{e}"),
            7 => format!("typeof {e}"),
            8 => format!("{e} + 1"),
            9 => format!("{e} ? 1 : 2"),
            10 => format!("({e})()"),
            11 => format!("({e})[0]"),
            12 => format!("({e} as any)"),
            13 => format!("new X({e})"),
            14 => format!("(async () => await {e})"),
            _ => format!("(function () {{ if (a) {{ return {e}; }} return 1; }})"),
        }
    }
    let mut generated = Vec::new();
    let (mut deepest_nesting, mut longest_chain) = (0, 0);
    while generated.len() < 1000 {
        let depth = 1 + next(40) as u32;
        let source = format!("export default {};", expression(depth, &mut next));
        let Ok(shape) = check_shape(&source) else {
            continue;
        };
        if shape.fits_inline(source.len()) {
            deepest_nesting = deepest_nesting.max(shape.nesting);
            longest_chain = longest_chain.max(shape.chain);
            generated.push(source);
        }
    }
    assert!(
        deepest_nesting >= 12 && longest_chain >= 12,
        "{deepest_nesting} {longest_chain}"
    );
    assert_eq!(
        transpile_on_stack(generated, 768 << 10),
        1000,
        "each is a valid program"
    );
}

#[test]
fn the_scan_measures_what_the_inline_bounds_limit() {
    let shape = check_shape("x = f([{ a: `${(1 + 2)}` }]); y = g()()").unwrap();
    // `f(`, `[`, `{`, the backtick, `${`, `(`: six deep; the two calls of `g` open two more.
    assert_eq!(shape.nesting, 6);
    assert_eq!(shape.opened, 8);
    assert!(shape.fits_inline(100));
    let at = |nesting, chain, opened| Shape {
        nesting,
        chain,
        opened,
        unsure: false,
    };
    assert!(at(INLINE_NESTING, INLINE_CHAIN, INLINE_OPENED).fits_inline(INLINE_SOURCE_BYTES));
    assert!(!at(INLINE_NESTING + 1, 0, 0).fits_inline(10));
    assert!(!at(0, INLINE_CHAIN + 1, 0).fits_inline(10));
    assert!(!at(0, 0, INLINE_OPENED + 1).fits_inline(10));
    assert!(!at(0, 0, 0).fits_inline(INLINE_SOURCE_BYTES + 1));
    let unsure = Shape {
        unsure: true,
        ..at(0, 0, 0)
    };
    assert!(!unsure.fits_inline(10));
}

/// What the scan skips (strings, comments, regular expressions) must be what the parser skips:
/// each of these hid the brackets after it from the scan, which let 300 levels past the limit
/// of 256 (and 1,000 levels in 2 KiB onto an async thread's stack).
#[test]
fn nothing_the_parser_reads_as_code_hides_from_the_scan() {
    let deep = format!("{}1{}", "(".repeat(300), ")".repeat(300));
    for hider in [
        "// a comment ended by a carriage return\r",
        "// a comment ended by U+2028\u{2028}",
        "// a comment ended by U+2029\u{2029}",
        "const q = /'/;\n",
        "const q = /\"/;\n",
        "const q = /`/;\n",
        "const q = /[/*]/;\n",
        "const q = /a\\/'/g;\n",
        "const q = 'a string ended by a carriage return\r",
        "function f() { return /'/ }\n",
        "if (a) /'/.test(b);\n",
        "const q = [/'/, 1];\n",
        // A division read as a regular expression would hide all up to the next `/`.
        "a++ / 1; ",
        "a-- / 1; ",
        "x.return / 1; ",
        "x?.typeof / 1; ",
        "a! / 1; ",
        "a ! / 1; ",
        "y = z as Array<T> / 1; ",
        "y = {} / 1; ",
        "y = await / 1; ",
        "a++ /* c */ / 1; ",
    ] {
        let source = format!("{hider}x = {deep} / 2;");
        let error = check_shape(&source).expect_err(hider);
        assert!(
            error.message.contains("256 levels"),
            "{hider:?}: {}",
            error.message
        );
    }
}

#[test]
fn regular_expressions_are_read_whole_and_divisions_as_operators() {
    // A regular expression's quotes, brackets and slashes open nothing.
    let shape = check_shape("const r = /a[/(]b'\"`\\/[)]/gu; export default r.test(s);").unwrap();
    assert_eq!((shape.nesting, shape.unsure), (1, false), "{shape:?}");
    assert!(shape.fits_inline(60));
    // A division after a name, a number, `)` or `]` is an operator.
    let shape = check_shape("x = a / 2 / (b) / c[0] / 'd'.length;").unwrap();
    assert!(!shape.unsure, "{shape:?}");
    // Where a program usually writes one, a regular expression is sure.
    let shape = check_shape(
        "if (!/^\\d+$/.test(s)) x = s.split(/,/).map((p) => /x/.test(p));\nreturn /'/;",
    )
    .unwrap();
    assert!(!shape.unsure, "{shape:?}");
    // Where a `/` could be either, the source is not transpiled on the async thread.
    for source in [
        "x = {} / 2;",
        "x = await / 2;",
        "x = of / 2;",
        "const q = /unterminated\nx = 1;",
    ] {
        let shape = check_shape(source).unwrap();
        assert!(
            shape.unsure && !shape.fits_inline(source.len()),
            "{source:?}"
        );
    }
}

/// Small sources built from the pieces that confuse a scanner most (line terminators of every
/// kind, quotes, comment and regular-expression openers): the ones the host would transpile on
/// its async thread must transpile within the small stack too.
/// Programs as agents write them (the README's, and a longer one with a division, regular
/// expressions and types) are sure, and transpiled on the async thread.
#[test]
fn typical_programs_are_transpiled_on_the_async_thread() {
    let programs = [
        "import { search_issues, get_issue } from './servers/demo';\n\n\
         const found = await search_issues({ query: 'crash', state: 'all' });\n\
         const issues = await Promise.all(found.issues.map((i) => get_issue({ id: i.id })));\n\
         console.log(`read ${issues.length} issues`);\n\
         export default issues.map((i: any) => ({ id: i.id, comments: i.comments.length }));\n",
        "import { list_files, read_file } from './servers/fs';\n\
         interface Row { name: string; size: number }\n\
         const files = (await list_files({ path: '/logs' })) as Row[];\n\
         const logs = files.filter((f) => /\\.log$/.test(f.name) && f.size > 0);\n\
         let errors = 0;\n\
         for (const f of logs) {\n\
         \x20 const text = String(await read_file({ path: `/logs/${f.name}` }));\n\
         \x20 errors += text.split(/\\r?\\n/).filter((l) => l.includes('ERROR')).length;\n\
         }\n\
         const total = logs.reduce((n, f) => n + f.size, 0);\n\
         export default { errors, average: logs.length ? total / logs.length : 0 };\n",
    ];
    for source in programs {
        let shape = check_shape(source).unwrap();
        assert!(shape.fits_inline(source.len()), "{shape:?}: {source}");
        guarded(source, "agent.ts", true).unwrap();
    }
}

#[test]
fn scanner_confusing_small_sources_transpile_within_a_small_stack() {
    const PIECES: &[&str] = &[
        "(", ")", "[", "]", "{", "}", "`", "${", "'", "\"", "/", "//", "/*", "*/", "\\", "\n",
        "\r", "\u{2028}", "=>", "!", "+", "?", ":", "if (a)", "else", "return", "await", "typeof",
        "x", "f()", ";", ",", "/'/", "/[/*]/", "a.b", "as any", "<T>",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let mut admitted = Vec::new();
    let mut tried = 0;
    while admitted.len() < 2000 && tried < 200_000 {
        tried += 1;
        let mut source = String::new();
        for _ in 0..1 + next(40) {
            let piece = PIECES[next(PIECES.len() as u64) as usize];
            source.push_str(&piece.repeat(1 + next(60) as usize));
        }
        if check_shape(&source).is_ok_and(|shape| shape.fits_inline(source.len())) {
            admitted.push(source);
        }
    }
    assert!(
        admitted.len() >= 1000,
        "only {} of {tried} fit",
        admitted.len()
    );
    // Most do not parse; what matters is that none overflows.
    transpile_on_stack(admitted, 768 << 10);
}

/// Statements nest without braces: each of these, 100 KB and more of one form, took the host
/// gigabytes and seconds (or its stack) before the scan counted them. Each is now refused by the
/// scan, before SWC sees it, naming the limit.
#[test]
fn statements_nested_without_braces_are_refused_by_the_scan() {
    let n = 20_000;
    let shapes = [
        "if (a)\n".repeat(n) + ";",
        "for (;;)".repeat(n) + ";",
        "for (;;)\n".repeat(n) + ";",
        "while (a)\n".repeat(n) + ";",
        "with (a)\n".repeat(n) + ";",
        "for (x of y)\n".repeat(n) + ";",
        "for await (x of y)\n".repeat(n) + ";",
        "do\n".repeat(n) + "x;" + &"\nwhile (a);".repeat(n),
        "if (a) x\nelse\n".repeat(n) + ";",
        "a:\n".repeat(n) + ";",
        "x =>\n".repeat(n) + "1",
        "await\n".repeat(n) + "1",
        "new\n".repeat(n) + "X",
    ];
    for shape in shapes {
        let error = check_shape(&shape).expect_err(&shape[..20]);
        assert_eq!(error.kind, ErrorKind::Syntax);
        assert!(
            error.message.contains("1024 operators") || error.message.contains("256 levels"),
            "{:?}: {}",
            &shape[..20],
            error.message
        );
    }
    // Siblings are not nesting: the same forms one after another pass.
    for sibling in [
        "if (a) x;\n",
        "for (;;) break;\n",
        "while (a) x()\n",
        "a: x;\n",
    ] {
        check_shape(&sibling.repeat(n)).expect(sibling);
    }
}

#[test]
fn large_flat_sources_stay_linear() {
    let fill = |unit: &str| unit.repeat((512 << 10) / unit.len());
    let shapes = [
        format!("const a = [{}1];", fill("1, ")),
        format!("const o = {{ {}z: 1 }};", fill("a: 1, ")),
        fill("x += 1;\n"),
        fill("function f(a: number): number { return a * 2 + 1 }\n"),
        (0..10_000)
            .map(|i| format!("function f{i}(a: number): number {{ return a * 2 + 1 }}\n"))
            .collect(),
        format!("const s = \"{}\";", fill("abc")),
        format!("const t = `{}`;", fill("${x}")),
        fill("if (a) { b() } else { c() }\n"),
        fill("if (a) { b() } else if (c) { d() } "),
        fill("const v = await demo.echo({ message: `n=${i}` })\n"),
    ];
    for shape in shapes {
        let started = std::time::Instant::now();
        let result = transpile(&shape, "agent.ts");
        assert!(result.is_ok(), "{:?}: {result:?}", &shape[..20]);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?} took {:?}",
            &shape[..20],
            started.elapsed()
        );
    }
}

#[test]
fn ordinary_programs_without_semicolons_pass() {
    let line = "const value = await demo.echo({ message: `n=${i}`, extra: a.b.c ?? d })\n";
    let source = line.repeat(2000);
    transpile(&source, "agent.ts").unwrap();
    let functions = "export function f(a: A<B>, b: C): D<E> { return a.b + b.c }\n".repeat(2000);
    transpile(&functions, "agent.ts").unwrap();
    let object = format!(
        "const config = {{ {} }};",
        (0..5000)
            .map(|i| format!("k{i}: {{ a: 1, b: [1, 2, 3], c: x.y }}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    transpile(&object, "agent.ts").unwrap();
}

#[test]
fn units_read_well() {
    assert_eq!(human_bytes(64 << 20), "64 MiB");
    assert_eq!(human_bytes(64 << 10), "64 KiB");
    assert_eq!(human_bytes(1000), "1000 bytes");
    assert_eq!(human_duration(std::time::Duration::from_secs(30)), "30 s");
    assert_eq!(
        human_duration(std::time::Duration::from_millis(1500)),
        "1.5 s"
    );
    assert_eq!(
        human_duration(std::time::Duration::from_millis(250)),
        "250 ms"
    );
}

mod loader {
    use crate::sandbox::engine::loader_for_tests::{candidates, closest, normalize};

    #[test]
    fn imports_normalize() {
        assert_eq!(normalize("agent.ts", "./servers/demo"), "/servers/demo");
        assert_eq!(normalize("agent.ts", "/servers/demo"), "/servers/demo");
        assert_eq!(normalize("agent.ts", "servers/demo"), "/servers/demo");
        assert_eq!(
            normalize("/servers/demo/index.ts", "./echo"),
            "/servers/demo/echo"
        );
        assert_eq!(
            normalize("/servers/demo/index.ts", "../other/x.ts"),
            "/servers/other/x.ts"
        );
        assert_eq!(normalize("agent.ts", "../../etc/passwd"), "/etc/passwd");
    }

    #[test]
    fn candidates_cover_extensions_and_index() {
        assert_eq!(
            candidates("/servers/demo"),
            [
                "/servers/demo",
                "/servers/demo.ts",
                "/servers/demo.js",
                "/servers/demo/index.ts",
                "/servers/demo/index.js"
            ]
        );
        assert_eq!(candidates("/a/b.js"), ["/a/b.js", "/a/b.ts"]);
    }

    #[test]
    fn closest_finds_typos_only() {
        let names = ["echo", "add_numbers", "get_weather"];
        assert_eq!(closest("ech", names.into_iter()), Some("echo"));
        assert_eq!(
            closest("get_wether", names.into_iter()),
            Some("get_weather")
        );
        assert_eq!(closest("completely_else", names.into_iter()), None);
    }
}
