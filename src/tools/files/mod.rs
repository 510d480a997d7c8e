//! Built-in file tools of the API backends: read, list, search and write files in one folder,
//! the agent's working folder (its `cwd`, else the working directory of `aw-run`).
//!
//! | tool | arguments | gives |
//! |------|-----------|-------|
//! | `read_file` | `path`, `offset` (first line, from 1), `limit` (most lines) | the text as it is, without line numbers, at most [`MAX_READ`] bytes |
//! | `list_files` | `path` (default `.`), `recursive` (default false) | one entry per line, sorted; folders end in `/`, symbolic links in `@`; at most [`MAX_LIST`] entries |
//! | `search` | `pattern` (a fixed string), `path` (default `.`), `ignore_case` | `PATH:LINE: TEXT` per matching line, at most [`MAX_MATCHES`] |
//! | `write_file` | `path`, `content` (at most [`MAX_WRITE`] bytes) | creates or replaces the file whole, atomically, creating missing folders |
//!
//! Paths are relative to the working folder; the paths the tools print are too, so that they
//! can be given back. What is cut is said in a last line in brackets (`[cut at 500 matches:
//! ...]`), as is an empty result.
//!
//! Confinement, for every tool and path:
//! - an absolute path is refused, and so is any `..` component (even one that would stay
//!   inside); an empty path or `.` is the working folder itself;
//! - the path is resolved to its real path (symbolic links followed) and must lie inside the
//!   working folder: a symbolic link that leads outside is refused. A link that stays inside
//!   is followed, also for `write_file`, which then replaces the file it leads to;
//! - the file is then opened from the working folder's descriptor along that real path with
//!   no symbolic link allowed on the way (see [`crate::fs::beneath`]), so that a folder swapped
//!   for a link meanwhile cannot lead it outside;
//! - only regular files and folders are used: devices, FIFOs and sockets are refused (a file
//!   is checked before it is opened, opened without blocking, and checked again once open),
//!   and left out of listings and searches;
//! - `list_files` and `search` never follow a symbolic link met inside the tree;
//! - the aw root (the folder of the instances, `.workflow/` or `--root`; the instance
//!   directory instead when the working folder lies inside the aw root) and everything
//!   named `.git` or `.workflow` (the aw root of any aw tool run beside it) are out of
//!   reach: a path whose real path passes through one of them (by any spelling, through a
//!   symbolic link or not) is refused like a `..`, nothing new may take those names, and
//!   listings and searches leave them out. The aw root is known by its device and inode as
//!   well as its path, so another name for it is refused too. Were they reachable, a
//!   written file could make aw run a command: a worker added to `_state/agents.json`, a
//!   `core.fsmonitor` in `.git/config`;
//! - so is every folder and file git itself uses for the work tree the working folder lies
//!   in, whatever its name, as git tells it ([`crate::git::private_paths`]): a git
//!   directory made with `--separate-git-dir` or named by a `.git` file, the common git
//!   directory of linked work trees, the hooks folder of `core.hooksPath` (`.githooks/`,
//!   `.husky/`) even before it exists, and the configuration files the repository includes;
//! - error messages name the path as it was given, never the host's absolute path.
//!
//! An agent's `write_file` ([`FileTool::call_as`]) refuses a path that another agent leases
//! ([`crate::lease`]; the path relative to the work tree, the git top level or the directory
//! that holds the aw root), naming the holder, until when and why.
//!
//! `search` skips binary files (a NUL byte in the first [`BINARY_PROBE`] bytes) and files
//! larger than [`MAX_SEARCH_FILE`], and says how many it skipped; a matching line is shown up
//! to [`MAX_MATCH_LINE`] characters. `write_file` keeps the permission bits of a file it
//! replaces; a new file gets `0666` less the umask.

mod ops;
mod sandbox;

use schemars::JsonSchema;
use serde::Deserialize;

pub use ops::{
    BINARY_PROBE, MAX_LIST, MAX_MATCH_LINE, MAX_MATCHES, MAX_READ, MAX_SEARCH_FILE, MAX_WRITE,
};
pub use sandbox::Sandbox;

use crate::error::{Error, Result};
use crate::lease::{self, glob};
use crate::tools::args::{Args, Flag, Whole, parse, schema};
use crate::tools::{Caller, ToolDef};

crate::keyword_enum! {
    /// The built-in file tools an API agent may be given by name.
    pub enum FileTool {
        ReadFile = "read_file",
        ListFiles = "list_files",
        Search = "search",
        WriteFile = "write_file",
    }
}

/// `read_file`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    /// File path, relative to the working folder
    pub path: String,
    /// First line to give, counted from 1 (default 1)
    pub offset: Option<Whole>,
    /// Most lines to give (default: all, up to 256 KiB)
    pub limit: Option<Whole>,
}

/// `list_files`' arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFiles {
    /// Folder path, relative to the working folder (default .)
    pub path: Option<String>,
    /// List the whole tree below the folder (default false)
    pub recursive: Option<Flag>,
}

/// `search`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Search {
    /// The text to find, as written
    pub pattern: String,
    /// File or folder to search, relative to the working folder (default .)
    pub path: Option<String>,
    /// Match regardless of case (default false)
    pub ignore_case: Option<Flag>,
}

/// `write_file`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    /// File path, relative to the working folder
    pub path: String,
    /// The whole new content of the file
    pub content: String,
}

impl FileTool {
    /// The tool as the model is told of it: its input schema is made from its argument
    /// struct, and forbids arguments that the struct does not name.
    pub fn definition(self) -> ToolDef {
        let (description, schema) = match self {
            FileTool::ReadFile => (DESCRIPTION_READ, schema::<ReadFile>()),
            FileTool::ListFiles => (DESCRIPTION_LIST, schema::<ListFiles>()),
            FileTool::Search => (DESCRIPTION_SEARCH, schema::<Search>()),
            FileTool::WriteFile => (DESCRIPTION_WRITE, schema::<WriteFile>()),
        };
        ToolDef {
            name: self.name().to_string(),
            description: description.to_string(),
            schema,
        }
    }

    /// Run this tool in `sandbox` as `caller`'s agent: as [`FileTool::call`], except that
    /// `write_file` refuses a path that another agent leases in the caller's instance
    /// (exclusively or shared), with an error that tells the model what to do.
    pub fn call_as(self, sandbox: &Sandbox, caller: &Caller, args: &Args) -> Result<String> {
        if self == FileTool::WriteFile {
            let a: WriteFile = parse(self.name(), args)?;
            let path = sandbox.tree_path(&a.path)?;
            let held = lease::check(&caller.inst, &[glob::escape(&path)], Some(&caller.agent))?;
            if let Some((_, l)) = held.first() {
                let why = match l.reason.is_empty() {
                    true => String::new(),
                    false => format!(": {:?}", l.reason),
                };
                return Err(Error::Busy(format!(
                    "path {path} is leased by {} until {}{why}; take another card or wait \
                     (lease_take with wait)",
                    l.agent(),
                    l.until()
                )));
            }
        }
        self.call(sandbox, args)
    }

    /// Run this tool in `sandbox`, whatever the leases; Ok(text for the model) or an Error
    /// whose Display is one line for the model.
    pub fn call(self, sandbox: &Sandbox, args: &Args) -> Result<String> {
        let tool = self.name();
        match self {
            FileTool::ReadFile => {
                let a: ReadFile = parse(tool, args)?;
                let offset = a.offset.map_or(1, |o| o.0);
                ops::read_file(sandbox, &a.path, offset, a.limit.map(|l| l.0))
            }
            FileTool::ListFiles => {
                let a: ListFiles = parse(tool, args)?;
                let path = a.path.as_deref().unwrap_or(".");
                ops::list_files(sandbox, path, a.recursive.is_some_and(|r| r.0))
            }
            FileTool::Search => {
                let a: Search = parse(tool, args)?;
                let path = a.path.as_deref().unwrap_or(".");
                let ignore_case = a.ignore_case.is_some_and(|i| i.0);
                ops::search(sandbox, &a.pattern, path, ignore_case)
            }
            FileTool::WriteFile => {
                let a: WriteFile = parse(tool, args)?;
                ops::write_file(sandbox, &a.path, &a.content)
            }
        }
    }
}

const DESCRIPTION_READ: &str = "Read a text file of the working folder. Gives its text as it is, without line \
                 numbers, at most 256 KiB; when more follows, a last line in brackets says \
                 which offset reads on.";

const DESCRIPTION_LIST: &str = "List a folder of the working folder, one entry per line, sorted. Folders end \
                 in /, symbolic links in @ (not part of the name). With recursive, the whole \
                 tree below it, without following symbolic links. .git folders and the aw \
                 root are left out. At most 2000 entries.";

const DESCRIPTION_SEARCH: &str = "Search the text files under a path of the working folder for a fixed string \
                 (not a regular expression). One line per match: path:line: text. Binary \
                 files, files over 4 MiB, .git folders and the aw root are skipped; at most \
                 500 matches.";

const DESCRIPTION_WRITE: &str = "Create or replace a file of the working folder with the given content (at \
                 most 1 MiB), creating the folders it needs. The file is replaced whole, at \
                 once. A path another agent leases is refused.";

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::stat::Mode;
    use serde_json::{Value, json};
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::{Path, PathBuf};

    /// A working folder `work` with a sibling `outside` holding `secret`.
    struct Fixture {
        tmp: tempfile::TempDir,
        sb: Sandbox,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture::with(|_| {})
        }

        /// A fixture whose working folder `setup` prepares before the sandbox is made.
        fn with(setup: impl FnOnce(&Path)) -> Fixture {
            let tmp = tempfile::tempdir().unwrap();
            fs::create_dir_all(tmp.path().join("work")).unwrap();
            setup(&tmp.path().join("work"));
            fs::create_dir_all(tmp.path().join("outside")).unwrap();
            fs::write(tmp.path().join("outside/secret"), "top secret\n").unwrap();
            let sb = Sandbox::new(
                &tmp.path().join("work"),
                &tmp.path().join("work/.workflow"),
                &tmp.path().join("work/.workflow/t"),
            )
            .unwrap();
            Fixture { tmp, sb }
        }

        fn work(&self, rel: &str) -> PathBuf {
            self.tmp.path().join("work").join(rel)
        }

        fn put(&self, rel: &str, content: &str) {
            let p = self.work(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }

        fn call(&self, tool: FileTool, args: Value) -> Result<String> {
            let Value::Object(map) = args else { panic!() };
            tool.call(&self.sb, &map)
        }

        fn ok(&self, tool: FileTool, args: Value) -> String {
            self.call(tool, args)
                .unwrap_or_else(|e| panic!("{tool}: {e}"))
        }

        /// The error's message, checked to be one line without the host's paths.
        fn err(&self, tool: FileTool, args: Value) -> String {
            let e = self.call(tool, args.clone()).expect_err(&args.to_string());
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "{msg}");
            let host = self.tmp.path().to_str().unwrap();
            assert!(!msg.contains(host), "{msg}");
            msg
        }
    }

    fn mkfifo(p: &Path) {
        nix::unistd::mkfifo(p, Mode::from_bits_truncate(0o600)).unwrap();
    }

    use FileTool::{ListFiles, ReadFile, Search, WriteFile};

    #[test]
    fn names_round_trip_and_schemas_are_closed_objects() {
        crate::keyword::assert_round_trips(FileTool::ALL, |t| t.name(), FileTool::from_name);
        for &t in FileTool::ALL {
            let ToolDef {
                description,
                schema,
                ..
            } = t.definition();
            assert!(description.len() > 40, "{t}");
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["additionalProperties"], false);
            let props = schema["properties"].as_object().unwrap();
            for r in schema["required"].as_array().unwrap() {
                assert!(props.contains_key(r.as_str().unwrap()), "{t}: {r}");
            }
        }
        assert_eq!(
            WriteFile.definition().schema["required"],
            json!(["path", "content"])
        );
        assert_eq!(ListFiles.definition().schema["required"], json!([]));
    }

    #[test]
    fn read_file_gives_the_text_and_reads_on() {
        let f = Fixture::new();
        f.put("d/three.txt", "one\ntwo\nthree\n");
        f.put("open-end.txt", "a\nb");
        f.put("empty.txt", "");
        let read = |args: Value| f.ok(ReadFile, args);
        assert_eq!(read(json!({"path": "d/three.txt"})), "one\ntwo\nthree\n");
        assert_eq!(read(json!({"path": "./d//three.txt"})), "one\ntwo\nthree\n");
        assert_eq!(
            read(json!({"path": "d/three.txt", "offset": 2, "limit": 1})),
            "two\n[more follows: read on with offset=3]"
        );
        assert_eq!(
            read(json!({"path": "d/three.txt", "offset": "3", "limit": 5})),
            "three\n"
        );
        assert_eq!(read(json!({"path": "open-end.txt", "offset": 2})), "b");
        assert_eq!(read(json!({"path": "empty.txt"})), "[empty file]");
        for (args, want) in [
            (
                json!({"path": "d/three.txt", "offset": 4}),
                "d/three.txt: offset 4 is past the end (the file has 3 lines)",
            ),
            (
                json!({"path": "open-end.txt", "offset": 3}),
                "open-end.txt: offset 3 is past the end (the file has 2 lines)",
            ),
            (
                json!({"path": "d/three.txt", "offset": 0}),
                "'offset' must be a whole number of at least 1",
            ),
            (
                json!({"path": "d/none.txt"}),
                "d/none.txt: no such file or folder",
            ),
            (json!({"path": "d"}), "d: is a folder; use list_files"),
            (
                json!({"path": "d/three.txt/x"}),
                "d/three.txt/x: a part of the path is not a folder",
            ),
        ] {
            assert_eq!(f.err(ReadFile, args), want);
        }
    }

    #[test]
    fn read_file_stops_at_256_kib_on_a_line_end() {
        let f = Fixture::new();
        let line = format!("{}\n", "x".repeat(1023));
        f.put("big.txt", &line.repeat(300));
        let first = f.ok(ReadFile, json!({"path": "big.txt"}));
        let want = format!(
            "{}[more follows: read on with offset=257]",
            line.repeat(256)
        );
        assert_eq!(first, want);
        let rest = f.ok(ReadFile, json!({"path": "big.txt", "offset": 257}));
        assert_eq!(rest, line.repeat(44));
        // One line alone longer than the cap: its start, and where to read on.
        f.put("long.txt", &format!("{}\nnext\n", "y".repeat(300 * 1024)));
        let long = f.ok(ReadFile, json!({"path": "long.txt"}));
        assert_eq!(
            long,
            format!(
                "{}\n[line 1 is longer than 256 KiB and was cut; read on with offset=2]",
                "y".repeat(MAX_READ)
            )
        );
        assert_eq!(
            f.ok(ReadFile, json!({"path": "long.txt", "offset": 2})),
            "next\n"
        );
    }

    #[test]
    fn paths_that_lead_outside_are_refused_by_every_tool() {
        let f = Fixture::new();
        let outside = f.tmp.path().join("outside");
        fs::create_dir(f.work("sub")).unwrap();
        symlink(outside.join("secret"), f.work("secret-link")).unwrap();
        symlink("../outside", f.work("out-dir")).unwrap();
        symlink("/dev/null", f.work("null")).unwrap();
        let cases = [
            (
                "../outside/secret",
                "'..' is refused: paths stay inside the working folder",
            ),
            (
                "sub/../x",
                "'..' is refused: paths stay inside the working folder",
            ),
            (
                "/etc/passwd",
                "absolute paths are refused; give a path relative to the working folder",
            ),
            (
                "secret-link",
                "leads outside the working folder (through a symbolic link)",
            ),
            (
                "out-dir",
                "leads outside the working folder (through a symbolic link)",
            ),
            (
                "out-dir/secret",
                "leads outside the working folder (through a symbolic link)",
            ),
            (
                "null",
                "leads outside the working folder (through a symbolic link)",
            ),
        ];
        for (path, why) in cases {
            let want = format!("{path}: {why}");
            assert_eq!(f.err(ReadFile, json!({"path": path})), want);
            assert_eq!(f.err(ListFiles, json!({"path": path})), want);
            assert_eq!(f.err(Search, json!({"pattern": "top", "path": path})), want);
            let write = json!({"path": path, "content": "pwned"});
            let got = f.err(WriteFile, write);
            assert!(got.starts_with(&format!("{path}: ")), "{got}");
            assert!(got.contains("refused") || got.contains("outside"), "{got}");
        }
        let write = |p: &str| f.err(WriteFile, json!({"path": p, "content": "x"}));
        assert_eq!(
            write("out-dir/new/file"),
            "out-dir/new/file: leads outside the working folder (through a symbolic link)"
        );
        assert_eq!(
            fs::read_to_string(outside.join("secret")).unwrap(),
            "top secret\n"
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
        assert!(fs::symlink_metadata(f.work("null")).unwrap().is_symlink());
        assert!(!f.work("sub/x").exists() && !f.tmp.path().join("x").exists());
    }

    /// Run git in `dir`, which must succeed.
    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .expect("git must be installed to test the file tools");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    #[test]
    fn the_folders_git_uses_are_out_of_reach_whatever_their_names() {
        // A git directory made with --separate-git-dir inside the tree (the work tree has a
        // `.git` file naming it), hooks in .githooks/ (not made yet), a configuration file
        // included from the tree.
        let f = Fixture::with(|w| {
            git(w, &["init", "-q", "--separate-git-dir", "store"]);
            git(w, &["config", "core.hooksPath", ".githooks"]);
            git(w, &["config", "include.path", "../shared.cfg"]);
            fs::write(w.join("shared.cfg"), "[user]\n\tname = secret\n").unwrap();
            fs::write(w.join("a.txt"), "fine\n").unwrap();
        });
        assert!(f.work("store/config").is_file() && f.work(".git").is_file());
        let out = |p: &str| {
            format!("{p}: refused: the aw root and .git folders are out of reach of the file tools")
        };
        for p in ["store", "store/config", "store/HEAD", "shared.cfg"] {
            assert_eq!(f.err(ReadFile, json!({"path": p})), out(p));
        }
        for p in [
            "store/config",
            "store/hooks/pre-commit",
            ".githooks/pre-commit",
            "shared.cfg",
        ] {
            let got = f.err(
                WriteFile,
                json!({"path": p, "content": "#!/bin/sh\ntouch pwned\n"}),
            );
            assert_eq!(got, out(p));
        }
        assert!(
            !fs::read_to_string(f.work("store/config"))
                .unwrap()
                .contains("pwned")
        );
        assert!(!f.work(".githooks").exists() && !f.work("store/hooks/pre-commit").exists());
        assert_eq!(f.ok(ListFiles, json!({})), "a.txt");
        assert_eq!(f.ok(ReadFile, json!({"path": "a.txt"})), "fine\n");

        // husky's hooks folder, which exists, in an ordinary repository.
        let f = Fixture::with(|w| {
            git(w, &["init", "-q"]);
            git(w, &["config", "core.hooksPath", ".husky"]);
            fs::create_dir(w.join(".husky")).unwrap();
            fs::write(w.join(".husky/pre-commit"), "npm test\n").unwrap();
        });
        for p in [".husky/pre-commit", ".husky/post-commit", "./.husky"] {
            let got = f.err(WriteFile, json!({"path": p, "content": "touch pwned\n"}));
            assert_eq!(got, out(p));
        }
        assert_eq!(
            fs::read_to_string(f.work(".husky/pre-commit")).unwrap(),
            "npm test\n"
        );
        assert_eq!(f.ok(ListFiles, json!({})), "[empty folder]");

        // A working folder inside a git directory whatever its name is refused.
        let tmp = tempfile::tempdir().unwrap();
        git(tmp.path(), &["init", "-q", "--separate-git-dir", "store"]);
        let e = Sandbox::new(
            &tmp.path().join("store/refs"),
            &tmp.path().join(".workflow"),
            &tmp.path().join(".workflow/t"),
        );
        assert!(e.is_err());
    }

    #[test]
    fn the_aw_root_and_git_folders_are_out_of_reach() {
        let f = Fixture::new();
        f.put(".workflow/t/_state/agents.json", "{\"agents\":[]} secret\n");
        f.put(".git/config", "[core]\nsecret\n");
        f.put("sub/.git/config", "[core]\nsecret\n");
        f.put(".GIT/notes", "not git: names are exact\n");
        f.put("wt/.git", "gitdir: ../.git/worktrees/wt secret\n");
        f.put("src/a.rs", "fine\n");
        symlink(".workflow", f.work("wf-link")).unwrap();
        symlink(".git", f.work("git-link")).unwrap();
        symlink(".workflow/t/_state/agents.json", f.work("agents-link")).unwrap();
        symlink("../.git/config", f.work("src/config-link")).unwrap();
        let out = |p: &str| {
            format!("{p}: refused: the aw root and .git folders are out of reach of the file tools")
        };
        let paths = [
            ".workflow",
            ".workflow/",
            "./.workflow",
            ".//.workflow//t",
            ".workflow/t/_state/agents.json",
            "./.workflow/t/_state/agents.json",
            "wf-link",
            "wf-link/t/_state/agents.json",
            "agents-link",
            ".git",
            ".git/",
            ".//.git/config",
            ".git/config",
            "sub/.git/config",
            "git-link/config",
            "src/config-link",
            "wt/.git",
        ];
        for p in paths {
            assert_eq!(f.err(ReadFile, json!({"path": p})), out(p));
            assert_eq!(f.err(ListFiles, json!({"path": p})), out(p));
            assert_eq!(
                f.err(Search, json!({"pattern": "secret", "path": p})),
                out(p)
            );
            if !p.ends_with('/') {
                let got = f.err(WriteFile, json!({"path": p, "content": "pwned"}));
                assert_eq!(got, out(p));
            }
        }
        // Nothing new below them either, nor a new .git folder anywhere.
        for p in [
            ".workflow/t/_state/new.json",
            ".workflow/new/x",
            "wf-link/new",
            ".git/hooks/pre-commit",
            "git-link/newdir/x",
            "new/.git/config",
            ".git",
        ] {
            assert_eq!(f.err(WriteFile, json!({"path": p, "content": "x"})), out(p));
        }
        assert_eq!(
            fs::read_to_string(f.work(".workflow/t/_state/agents.json")).unwrap(),
            "{\"agents\":[]} secret\n"
        );
        assert_eq!(
            fs::read_to_string(f.work(".git/config")).unwrap(),
            "[core]\nsecret\n"
        );
        assert!(!f.work(".workflow/new").exists() && !f.work("new").exists());
        assert!(!f.work(".git/hooks").exists() && !f.work(".workflow/t/_state/new.json").exists());
        // Listings and searches leave them out; links are shown, never followed.
        assert_eq!(
            f.ok(ListFiles, json!({"recursive": true})),
            ".GIT/\n.GIT/notes\nagents-link@\ngit-link@\nsrc/\nsrc/a.rs\nsrc/config-link@\nsub/\nwf-link@\nwt/"
        );
        assert_eq!(
            f.ok(Search, json!({"pattern": "secret"})),
            "[no match for 'secret']"
        );
        assert_eq!(
            f.ok(Search, json!({"pattern": "names are exact"})),
            ".GIT/notes:1: not git: names are exact"
        );
        // Elsewhere the tools work as before.
        f.ok(WriteFile, json!({"path": "src/b.rs", "content": "x"}));
        f.ok(WriteFile, json!({"path": ".GIT/x", "content": "x"}));
        assert_eq!(f.ok(ReadFile, json!({"path": "./src//a.rs"})), "fine\n");

        // The aw root is known by what it is, not by its name; any .workflow stays hidden.
        let sb = Sandbox::new(&f.work(""), &f.work("sub"), &f.work("sub/t")).unwrap();
        let call = |tool: FileTool, args: Value| {
            let Value::Object(map) = args else { panic!() };
            tool.call(&sb, &map).map_err(|e| e.to_string())
        };
        symlink("sub", f.work("sub-alias")).unwrap();
        fs::write(f.work("sub/x"), "x").unwrap();
        for p in [
            "sub/x",
            "sub-alias/x",
            "./sub",
            ".workflow/t/_state/agents.json",
            "wf-link",
        ] {
            assert_eq!(call(ReadFile, json!({"path": p})), Err(out(p)));
        }
        assert!(!call(ListFiles, json!({})).unwrap().contains("sub/"));

        // A working folder inside the aw root or a .git folder is refused.
        for inside in [".workflow/t", ".git", "sub/.git"] {
            let e = Sandbox::new(
                &f.work(inside),
                &f.work(".workflow"),
                &f.work(".workflow/t"),
            )
            .err()
            .unwrap();
            assert_eq!(e.exit_code(), crate::error::exit::NOPERM, "{e}");
        }
        // A working folder inside the aw root (an instance directory given as
        // context.config.dir beside it): the instance is out of reach, the rest is not.
        f.put("team/_state/agents.json", "{}\n");
        let sb = Sandbox::new(&f.work(""), &f.work(""), &f.work("team")).unwrap();
        let call = |tool: FileTool, args: Value| {
            let Value::Object(map) = args else { panic!() };
            tool.call(&sb, &map).map_err(|e| e.to_string())
        };
        for p in ["team", "team/_state/agents.json", "./team/"] {
            assert_eq!(call(ListFiles, json!({"path": p})), Err(out(p)));
        }
        let p = "team/_state/agents.json";
        assert_eq!(
            call(WriteFile, json!({"path": p, "content": "x"})),
            Err(out(p))
        );
        assert_eq!(
            call(ReadFile, json!({"path": "src/a.rs"})),
            Ok("fine\n".into())
        );
        assert!(!call(ListFiles, json!({})).unwrap().contains("team"));
        let e = Sandbox::new(&f.work("team/_state"), &f.work(""), &f.work("team"))
            .err()
            .unwrap();
        assert_eq!(e.exit_code(), crate::error::exit::NOPERM, "{e}");

        // An aw root made after the sandbox is refused all the same.
        let sb =
            Sandbox::new(&f.work("src"), &f.work("src/later"), &f.work("src/later/t")).unwrap();
        fs::create_dir(f.work("src/later")).unwrap();
        let Value::Object(args) = json!({"path": "later/x", "content": "x"}) else {
            panic!()
        };
        assert_eq!(
            WriteFile.call(&sb, &args).unwrap_err().to_string(),
            out("later/x")
        );
    }

    #[test]
    fn fifos_are_refused_without_being_opened() {
        let f = Fixture::new();
        mkfifo(&f.work("pipe"));
        f.put("d/f.txt", "text\n");
        mkfifo(&f.work("d/pipe"));
        symlink("pipe", f.work("pipe-link")).unwrap();
        // Opening a FIFO for reading would wait for a writer: run in a thread, bounded.
        let sb = Sandbox::new(&f.work(""), &f.work(".workflow"), &f.work(".workflow/t")).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let call = |tool: FileTool, args: Value| {
                let Value::Object(map) = args else { panic!() };
                tool.call(&sb, &map).map_err(|e| e.to_string())
            };
            let got = [
                call(ReadFile, json!({"path": "pipe"})),
                call(ReadFile, json!({"path": "pipe-link"})),
                call(ListFiles, json!({"path": "pipe"})),
                call(Search, json!({"pattern": "x", "path": "pipe"})),
                call(WriteFile, json!({"path": "pipe", "content": "x"})),
                call(Search, json!({"pattern": "text"})),
                call(ListFiles, json!({"recursive": true})),
            ];
            tx.send(got).unwrap();
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a tool hung on a FIFO");
        let refused = |p: &str| {
            Err(format!(
                "{p}: not a regular file or folder (a device, FIFO or socket)"
            ))
        };
        assert_eq!(got[0], refused("pipe"));
        assert_eq!(got[1], refused("pipe-link"));
        assert_eq!(got[2], refused("pipe"));
        assert_eq!(got[3], refused("pipe"));
        assert_eq!(got[4], refused("pipe"));
        assert_eq!(got[5], Ok("d/f.txt:1: text".to_string()));
        assert_eq!(got[6], Ok("d/\nd/f.txt\npipe-link@".to_string()));
        let kind = fs::symlink_metadata(f.work("pipe")).unwrap().file_type();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
    }

    #[test]
    fn links_inside_are_followed_when_named_and_never_in_walks() {
        let f = Fixture::new();
        f.put("real/a.txt", "needle here\n");
        symlink("real", f.work("alias")).unwrap();
        symlink("real/a.txt", f.work("a-link")).unwrap();
        assert_eq!(
            f.ok(ReadFile, json!({"path": "alias/a.txt"})),
            "needle here\n"
        );
        assert_eq!(f.ok(ReadFile, json!({"path": "a-link"})), "needle here\n");
        assert_eq!(
            f.ok(ListFiles, json!({"recursive": true})),
            "a-link@\nalias@\nreal/\nreal/a.txt"
        );
        assert_eq!(f.ok(ListFiles, json!({"path": "alias"})), "alias/a.txt");
        assert_eq!(
            f.ok(Search, json!({"pattern": "needle"})),
            "real/a.txt:1: needle here"
        );
        assert_eq!(
            f.ok(Search, json!({"pattern": "needle", "path": "alias"})),
            "alias/a.txt:1: needle here"
        );
        assert_eq!(
            f.ok(WriteFile, json!({"path": "a-link", "content": "new\n"})),
            "wrote 4 bytes to a-link (replaced)"
        );
        assert_eq!(fs::read_to_string(f.work("real/a.txt")).unwrap(), "new\n");
        assert!(fs::symlink_metadata(f.work("a-link")).unwrap().is_symlink());
        symlink("missing", f.work("dangling")).unwrap();
        assert_eq!(
            f.err(WriteFile, json!({"path": "dangling", "content": "x"})),
            "dangling: a symbolic link that leads nowhere"
        );
        assert!(!f.work("missing").exists());
    }

    #[test]
    fn list_files_sorts_marks_and_skips() {
        let f = Fixture::new();
        for p in ["b.txt", "a/z.md", "a/c/d.rs", ".git/HEAD", ".hidden"] {
            f.put(p, "x");
        }
        fs::create_dir(f.work("empty")).unwrap();
        // .git folders are left out (see the_aw_root_and_git_folders_are_out_of_reach).
        assert_eq!(f.ok(ListFiles, json!({})), ".hidden\na/\nb.txt\nempty/");
        assert_eq!(
            f.ok(ListFiles, json!({"path": ".", "recursive": true})),
            ".hidden\na/\na/c/\na/c/d.rs\na/z.md\nb.txt\nempty/"
        );
        assert_eq!(
            f.ok(ListFiles, json!({"path": "a/", "recursive": "true"})),
            "a/c/\na/c/d.rs\na/z.md"
        );
        assert_eq!(f.ok(ListFiles, json!({"path": "a/z.md"})), "a/z.md");
        assert_eq!(f.ok(ListFiles, json!({"path": "empty"})), "[empty folder]");
    }

    #[test]
    fn list_files_stops_at_2000_entries() {
        let f = Fixture::new();
        fs::create_dir(f.work("many")).unwrap();
        for i in 0..MAX_LIST + 5 {
            fs::write(f.work(&format!("many/{i:05}")), "").unwrap();
        }
        let out = f.ok(ListFiles, json!({"recursive": true}));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), MAX_LIST + 1);
        assert_eq!(lines[0], "many/");
        assert_eq!(lines[MAX_LIST - 1], "many/01998");
        assert_eq!(
            lines[MAX_LIST],
            "[cut at 2000 entries: list a folder further down]"
        );
    }

    #[test]
    fn search_finds_fixed_strings_in_text_files() {
        let f = Fixture::new();
        f.put("src/main.rs", "fn main() {\n    todo!(\"a.b\")\n}\n");
        f.put("src/lib.rs", "// TODO: a+b\n// a.b\n");
        f.put("notes.md", "Todo list\r\n");
        f.put(".git/config", "a.b\n");
        fs::write(f.work("bin.dat"), b"a.b\0\n").unwrap();
        f.put("huge.txt", &format!("a.b\n{}", "z".repeat(MAX_SEARCH_FILE)));
        f.put("wide.txt", &format!("a.b{}\n", "é".repeat(MAX_MATCH_LINE)));
        let search = |args: Value| f.ok(Search, args);
        assert_eq!(
            search(json!({"pattern": "a.b"})),
            format!(
                "src/lib.rs:2: // a.b\nsrc/main.rs:2:     todo!(\"a.b\")\nwide.txt:1: a.b{}…\n\
                 [2 file(s) skipped: binary, or larger than 4 MiB]",
                "é".repeat(MAX_MATCH_LINE - 3)
            )
        );
        assert_eq!(
            search(json!({"pattern": "todo", "path": "src", "ignore_case": true})),
            "src/lib.rs:1: // TODO: a+b\nsrc/main.rs:2:     todo!(\"a.b\")"
        );
        assert_eq!(
            search(json!({"pattern": "TODO", "path": "./notes.md", "ignore_case": true})),
            "notes.md:1: Todo list"
        );
        assert_eq!(
            search(json!({"pattern": "a.*b", "path": "src"})),
            "[no match for 'a.*b']"
        );
        assert_eq!(
            f.err(Search, json!({"pattern": ""})),
            "'pattern' must not be empty"
        );
    }

    #[test]
    fn search_stops_at_500_matches() {
        let f = Fixture::new();
        f.put("a.txt", &"hit\n".repeat(MAX_MATCHES + 1));
        f.put("b.txt", "hit\n");
        let out = f.ok(Search, json!({"pattern": "hit"}));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), MAX_MATCHES + 1);
        assert_eq!(lines[MAX_MATCHES - 1], "a.txt:500: hit");
        assert_eq!(
            lines[MAX_MATCHES],
            "[cut at 500 matches: search a narrower path or pattern]"
        );
    }

    #[test]
    fn write_file_creates_folders_and_replaces_whole() {
        let f = Fixture::new();
        let write = |p: &str, c: &str| f.call(WriteFile, json!({"path": p, "content": c}));
        assert_eq!(
            write("a/b/c.txt", "hello").unwrap(),
            "wrote 5 bytes to a/b/c.txt (new file)"
        );
        assert_eq!(fs::read_to_string(f.work("a/b/c.txt")).unwrap(), "hello");
        fs::set_permissions(f.work("a/b/c.txt"), fs::Permissions::from_mode(0o750)).unwrap();
        assert_eq!(
            write("./a/b/c.txt", "bye").unwrap(),
            "wrote 3 bytes to a/b/c.txt (replaced)"
        );
        let meta = fs::metadata(f.work("a/b/c.txt")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o750);
        assert_eq!(fs::read_to_string(f.work("a/b/c.txt")).unwrap(), "bye");
        assert_eq!(
            fs::read_dir(f.work("a/b")).unwrap().count(),
            1,
            "a temp file left"
        );
        assert_eq!(
            write("top.txt", "").unwrap(),
            "wrote 0 bytes to top.txt (new file)"
        );
        let err = |p: &str, c: &str| f.err(WriteFile, json!({"path": p, "content": c}));
        assert_eq!(err("a/b", "x"), "a/b: is a folder; give a file path");
        assert_eq!(err("new/", "x"), "new/: is a folder; give a file path");
        assert_eq!(err(".", "x"), ".: is a folder; give a file path");
        assert_eq!(
            err("top.txt/x", "x"),
            "top.txt/x: a part of the path is not a folder"
        );
        assert_eq!(
            err("big.txt", &"x".repeat(MAX_WRITE + 1)),
            format!(
                "big.txt: the content is {} bytes, more than the 1 MiB a file may be given",
                MAX_WRITE + 1
            )
        );
        assert!(write("big.txt", &"x".repeat(MAX_WRITE)).is_ok());
        assert!(!f.work("new").exists());
        // A folder on the way that is a link leading inside is written through.
        symlink("a", f.work("a-alias")).unwrap();
        assert!(write("a-alias/b/d.txt", "d").is_ok());
        assert_eq!(fs::read_to_string(f.work("a/b/d.txt")).unwrap(), "d");
        // A folder on the way that is a link to nothing is not created through.
        symlink("nowhere", f.work("gone")).unwrap();
        assert_eq!(
            err("gone/x/y.txt", "x"),
            "gone/x/y.txt: refused: a symbolic link on the way loops, leads nowhere or changed"
        );
        assert!(!f.work("nowhere").exists());
    }

    #[test]
    fn arguments_are_checked() {
        let f = Fixture::new();
        for (tool, args, want) in [
            (
                ReadFile,
                json!({"path": "x", "lines": 3}),
                "read_file: unknown argument 'lines' (arguments: path, offset, limit); nothing was done",
            ),
            (ReadFile, json!({}), "missing required parameter 'path'"),
            (
                WriteFile,
                json!({"path": "x"}),
                "missing required parameter 'content'",
            ),
            (ReadFile, json!({"path": 3}), "'path' must be a string"),
            (
                ListFiles,
                json!({"recursive": "yes"}),
                "'recursive' must be true or false",
            ),
            (
                ReadFile,
                json!({"path": "a\nb"}),
                "a?b: no such file or folder",
            ),
        ] {
            assert_eq!(f.err(tool, args), want);
        }
    }

    #[test]
    fn the_sandbox_must_be_a_folder() {
        let f = Fixture::new();
        let missing = Sandbox::new(
            &f.work("none"),
            &f.work(".workflow"),
            &f.work(".workflow/t"),
        )
        .err()
        .unwrap();
        assert_eq!(missing.exit_code(), crate::error::exit::NOINPUT);
        f.put("file", "");
        let file = Sandbox::new(
            &f.work("file"),
            &f.work(".workflow"),
            &f.work(".workflow/t"),
        )
        .err()
        .unwrap();
        assert!(file.to_string().ends_with("file: not a folder"), "{file}");
        // Reached through a link, the folder is its real path: links back into it stay inside.
        symlink(f.work(""), f.tmp.path().join("work-link")).unwrap();
        symlink("../work-link/b.txt", f.work("back")).unwrap();
        f.put("b.txt", "b\n");
        let sb = Sandbox::new(
            &f.tmp.path().join("work-link"),
            &f.work(".workflow"),
            &f.work(".workflow/t"),
        )
        .unwrap();
        let Value::Object(args) = json!({"path": "back"}) else {
            panic!()
        };
        assert_eq!(ReadFile.call(&sb, &args).unwrap(), "b\n");
    }

    #[test]
    fn write_file_refuses_a_path_another_agent_leases_and_says_what_to_do() {
        let f = Fixture::new();
        let inst = crate::instance::Root::new(f.work(".workflow"))
            .instance("t")
            .unwrap();
        let take = |who: &str, path: &str, shared: bool| {
            let req = lease::Request {
                holder: who.into(),
                paths: vec![path.into()],
                shared,
                ttl: lease::DEFAULT_TTL,
                reason: format!("{who} edits"),
                card: None,
            };
            lease::take(&inst, &req).unwrap()
        };
        let held = take("bob", "src/**", false);
        take("bob", "docs/*.md", true);
        let as_ = |who: &str, path: &str, sb: &Sandbox| {
            let Value::Object(args) = json!({"path": path, "content": "x\n"}) else {
                panic!()
            };
            WriteFile.call_as(sb, &Caller::new(inst.clone(), who), &args)
        };
        for path in ["src/a.rs", "./src//deep/b.rs", "docs/x.md"] {
            let e = as_("alice", path, &f.sb).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with("path "), "{msg}");
            assert!(
                msg.contains(" is leased by bob until ") && msg.contains("lease_take with wait"),
                "{msg}"
            );
            assert!(!f.work(path).exists(), "{path} was written");
        }
        let msg = as_("alice", "src/a.rs", &f.sb).unwrap_err().to_string();
        assert_eq!(
            msg,
            format!(
                "path src/a.rs is leased by bob until {}: \"bob edits\"; take another card or \
                 wait (lease_take with wait)",
                held.until()
            )
        );
        // The holder writes, and so does anyone where nothing is leased.
        as_("bob", "src/a.rs", &f.sb).unwrap();
        as_("alice", "lib/c.rs", &f.sb).unwrap();
        assert_eq!(fs::read_to_string(f.work("src/a.rs")).unwrap(), "x\n");
        // From a working folder below the top, paths are the work tree's.
        let sub =
            Sandbox::new(&f.work("src"), &f.work(".workflow"), &f.work(".workflow/t")).unwrap();
        let msg = as_("alice", "z.rs", &sub).unwrap_err().to_string();
        assert!(msg.starts_with("path src/z.rs is leased by bob"), "{msg}");
        assert!(!f.work("src/z.rs").exists());
    }
}
