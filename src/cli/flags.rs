//! One definition per option. Each tool has a table of its flags (long and short name,
//! value, the lines of its `--help`, how its value is completed, and for `aw-ctl` the
//! commands that take it); the table renders the Options section of `--help`, is what the
//! parser looks an option up in (an option not in it is refused, with the near one of the
//! table), and is what [`super::complete`] renders the shell completions from.

/// How the value of an option, or an argument, is completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Complete {
    /// Free text: nothing is offered.
    Text,
    /// A directory.
    Dir,
    /// A file.
    File,
    /// An instance of the root.
    Instance,
    /// An agent of the instance.
    Agent,
    /// An agent of the instance, or `user` (who acts).
    AgentOrUser,
    /// An agent of the instance, `user` or `system` (who sends).
    Sender,
    /// `agent`, `agent@instance` or `@instance`.
    Target,
    /// `agent@instance`, the agents of the instance.
    AgentAddress,
    /// A document of the instance.
    Document,
    /// One of these words.
    Choices(&'static [&'static str]),
}

/// An option of a tool.
#[derive(Debug)]
pub struct Flag {
    /// Its long name, without the dashes.
    pub long: &'static str,
    pub short: Option<char>,
    /// The name of its value (`DIR`), none for a switch. In brackets (`[FILE]`) the value
    /// may be left out.
    pub value: Option<&'static str>,
    /// An argument it goes with, shown after it in `--help` but not its value (`--docs
    /// [PATTERN]`).
    pub operand: Option<&'static str>,
    /// Its lines in `--help`, as shown there.
    pub doc: &'static str,
    /// A few words for the completions, when the start of `doc` does not say it well.
    pub brief: &'static str,
    /// How its value is completed.
    pub complete: Complete,
    /// It may be given several times.
    pub many: bool,
    /// The commands that take it (`aw-ctl`); none: every command.
    pub cmds: &'static [&'static str],
}

/// What a flag of a table is unless it says otherwise: `..BASE`.
pub const BASE: Flag = Flag {
    long: "",
    short: None,
    value: None,
    operand: None,
    doc: "",
    brief: "",
    complete: Complete::Text,
    many: false,
    cmds: &[],
};

pub const ROOT: Flag = Flag {
    long: "root",
    value: Some("DIR"),
    doc: "root directory (default: $AW_ROOT, else the nearest\n\
          .workflow/ here or above, else ./.workflow)",
    brief: "root directory",
    complete: Complete::Dir,
    ..BASE
};

pub const INSTANCE: Flag = Flag {
    long: "instance",
    short: Some('i'),
    value: Some("NAME"),
    doc: "instance (default: $AW_INSTANCE or 'default')",
    brief: "instance",
    complete: Complete::Instance,
    ..BASE
};

/// The kinds of output of `--generate`.
pub const GENERATE_KINDS: &[&str] = &["complete-bash", "complete-zsh", "complete-fish"];

pub const GENERATE: Flag = Flag {
    long: "generate",
    value: Some("KIND"),
    doc: "print a completion script (KIND: complete-bash,\n\
          complete-zsh or complete-fish)",
    brief: "print a completion script",
    complete: Complete::Choices(GENERATE_KINDS),
    ..BASE
};

pub const HELP: Flag = Flag {
    long: "help",
    short: Some('h'),
    doc: "print this help",
    brief: "print the help",
    ..BASE
};

pub const VERSION: Flag = Flag {
    long: "version",
    short: Some('V'),
    doc: "print the version",
    ..BASE
};

impl Flag {
    /// `--long`.
    pub fn dashed(&self) -> String {
        format!("--{}", self.long)
    }

    /// The value may be left out (`[FILE]`).
    pub fn optional_value(&self) -> bool {
        self.value.is_some_and(|v| v.starts_with('['))
    }

    /// A few words that say what it is: `brief`, else the first line of `doc` without the
    /// commands it is for, up to a `;`.
    pub fn about(&self) -> String {
        if !self.brief.is_empty() {
            return self.brief.to_string();
        }
        let first = self.doc.lines().next().unwrap_or_default();
        let first = match first.strip_prefix('(') {
            Some(rest) => rest.split_once(") ").map_or(first, |(_, r)| r),
            None => first,
        };
        let first = first.split("; ").next().unwrap_or(first);
        first.trim_end_matches([',', ';', ' ']).to_string()
    }

    /// Is it taken by the command `cmd` (a table's command name, `doc read`)?
    pub fn takes(&self, cmd: &str) -> bool {
        self.cmds.is_empty() || self.cmds.contains(&cmd)
    }
}

/// The flag of `table` that a command-line option names.
pub fn find<'a>(table: &'a [Flag], arg: &lexopt::Arg) -> Option<&'a Flag> {
    match arg {
        lexopt::Arg::Short(c) => table.iter().find(|f| f.short == Some(*c)),
        lexopt::Arg::Long(l) => table.iter().find(|f| f.long == *l),
        lexopt::Arg::Value(_) => None,
    }
}

/// The Options section of a help text: each flag, its value and its lines, the lines at
/// `column` (a flag too long for the room before it has its lines below it).
pub fn options(table: &[Flag], column: usize) -> String {
    let mut out = String::new();
    for f in table {
        let mut head = match f.short {
            Some(c) => format!("  -{c}, --{}", f.long),
            None => format!("      --{}", f.long),
        };
        if let Some(v) = f.value.or(f.operand) {
            head.push(' ');
            head.push_str(v);
        }
        item(&mut out, &head, f.doc, column);
    }
    out
}

/// The help text of a tool without commands: what it is, its options at `column`, what
/// its exit statuses are.
pub fn help(about: &str, table: &[Flag], column: usize, exit: &str) -> String {
    format!("{about}\nOptions:\n{}\n{exit}", options(table, column))
}

/// One item of a help text: `head`, then the lines of `doc` at `column`.
pub fn item(out: &mut String, head: &str, doc: &str, column: usize) {
    out.push_str(head);
    let last = head.rsplit('\n').next().unwrap_or(head);
    if last.chars().count() < column {
        out.push_str(&" ".repeat(column - last.chars().count()));
    } else {
        out.push('\n');
        out.push_str(&" ".repeat(column));
    }
    for (i, line) in doc.lines().enumerate() {
        if i > 0 {
            out.push_str(&" ".repeat(column));
        }
        out.push_str(line);
        out.push('\n');
    }
}

/// A positional argument of a command.
#[derive(Debug)]
pub struct Arg {
    /// Its name in the help (`AGENT`).
    pub name: &'static str,
    /// It may be left out.
    pub optional: bool,
    /// It may be given any number of times (the last argument only: `PATH...`).
    pub many: bool,
    pub complete: Complete,
}

/// A command of a tool that has commands (`aw-ctl`): its name (one word, or a word and
/// its subcommand, `doc read`), its arguments, its lines in `--help` (usage, what it does)
/// and what runs it.
#[derive(Debug)]
pub struct Cmd<R> {
    pub name: &'static str,
    pub args: &'static [Arg],
    /// After its arguments, `--` and a program with its arguments (`new`).
    pub program: bool,
    pub help: &'static [(&'static str, &'static str)],
    pub run: R,
}

impl<R> Cmd<R> {
    /// How many arguments it takes: at least, at most.
    pub fn arity(&self) -> (usize, usize) {
        let min = self.args.iter().filter(|a| !a.optional).count();
        match self.args.last().is_some_and(|a| a.many) {
            true => (min, usize::MAX),
            false => (min, self.args.len()),
        }
    }

    /// The words of its name: the command, and the subcommand if any.
    pub fn words(&self) -> (&'static str, Option<&'static str>) {
        match self.name.split_once(' ') {
            Some((c, s)) => (c, Some(s)),
            None => (self.name, None),
        }
    }

    /// A few words that say what it does: the first line of its help, up to a `;` or `(`.
    pub fn about(&self) -> String {
        let first = self.help.first().map_or("", |h| h.1);
        let first = first.lines().next().unwrap_or_default();
        let first = first.split(['(', ';']).next().unwrap_or(first);
        first.trim_end_matches([',', ' ']).to_string()
    }
}

/// The Commands section of a help text: each command's lines at `column`.
pub fn commands<R>(table: &[Cmd<R>], column: usize) -> String {
    let mut out = String::new();
    for c in table {
        for (usage, doc) in c.help {
            let head: Vec<String> = usage.lines().map(|l| format!("  {l}")).collect();
            item(&mut out, &head.join("\n"), doc, column);
        }
    }
    out
}

/// The first words of the commands of a table, each once, in order.
pub fn command_names<R>(table: &[Cmd<R>]) -> Vec<&'static str> {
    let mut names = Vec::new();
    for c in table {
        let (w, _) = c.words();
        if !names.contains(&w) {
            names.push(w);
        }
    }
    names
}
