//! The root directory and the instance directories inside it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Remedy, Result};
use crate::names::{self, DEFAULT_INSTANCE};

/// Name of the root directory looked for in the current directory and above.
pub const DEFAULT_ROOT: &str = ".workflow";

/// What a root directory created by aw holds in its `.gitignore`: everything, so that the
/// instances never show as untracked files.
pub const ROOT_GITIGNORE: &str = "*\n";

/// The root directory holding instances (`.workflow/`, `--root`, `AW_ROOT`).
#[derive(Debug, Clone)]
pub struct Root {
    path: PathBuf,
    /// Where the search for `.workflow/` started when it found none (the root is then
    /// `.workflow/` in that directory, created by the first write).
    searched_from: Option<PathBuf>,
}

impl Root {
    /// `--root DIR` if given, else `$AW_ROOT` if set and non-empty (either one, when it
    /// holds a `.workflow/`, means that `.workflow/`), else the nearest `.workflow/` in the
    /// current directory or above it (not across a file-system boundary) when it is trusted
    /// ([`crate::trust`]; one that is not is refused, exit 77), else `./.workflow`. The
    /// path is made absolute.
    pub fn resolve(arg: Option<&Path>) -> Result<Root> {
        let given = match arg {
            Some(p) => Some(p.to_path_buf()),
            None => match std::env::var_os("AW_ROOT") {
                Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
                _ => None,
            },
        };
        if let Some(p) = given {
            let inner = p.join(DEFAULT_ROOT);
            return Ok(Root::new(if inner.is_dir() { inner } else { p }));
        }
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        match discover(&cwd) {
            Some((path, walked)) => {
                crate::trust::check_found(&path, &walked)?;
                Ok(Root::new(path))
            }
            None => Ok(Root {
                path: cwd.join(DEFAULT_ROOT),
                searched_from: Some(cwd),
            }),
        }
    }

    pub fn new(path: impl Into<PathBuf>) -> Root {
        let path = path.into();
        Root {
            path: std::path::absolute(&path).unwrap_or(path),
            searched_from: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why there is nothing under this root, for a person: the search that found no
    /// `.workflow/`, or the root directory that does not exist; `None` when it exists.
    pub fn missing(&self) -> Option<String> {
        if self.path.is_dir() {
            return None;
        }
        Some(match &self.searched_from {
            Some(from) => format!(
                "no {DEFAULT_ROOT}/ found in {} or any directory above it",
                from.display()
            ),
            None => format!("root {} does not exist", self.path.display()),
        })
    }

    /// The instance called `name` (validated; it need not exist yet).
    pub fn instance(&self, name: &str) -> Result<Instance> {
        names::check_instance(name)?;
        let dir = self.path.join(name);
        // Every file in it is opened beneath it, no link followed.
        crate::fs::owned::own(&dir);
        Ok(Instance {
            name: name.to_string(),
            dir,
            root: self.clone(),
        })
    }

    /// Names of the existing instances (directories with a channel or aw's state), sorted.
    pub fn instances(&self) -> Result<Vec<String>> {
        let rd = match fs::read_dir(&self.path) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&self.path, e)),
        };
        let mut out = Vec::new();
        for de in rd {
            let de = de.at(&self.path)?;
            let name = de.file_name().to_string_lossy().into_owned();
            if names::is_instance_name(&name)
                && de.file_type().map(|t| t.is_dir()).unwrap_or(false)
                && is_instance_dir(&de.path())
            {
                out.push(name);
            }
        }
        out.sort();
        Ok(out)
    }
}

/// The nearest `.workflow/` directory in `start` or a directory above it, not crossing into
/// another file system (as git looks for `.git`), with the directories searched (`start`
/// first, the one that holds it last).
fn discover(start: &Path) -> Option<(PathBuf, Vec<PathBuf>)> {
    use std::os::unix::fs::MetadataExt;
    let dev = fs::metadata(start).ok()?.dev();
    let mut dir = start;
    let mut walked = Vec::new();
    loop {
        walked.push(dir.to_path_buf());
        let candidate = dir.join(DEFAULT_ROOT);
        if candidate.is_dir() {
            return Some((candidate, walked));
        }
        let parent = dir.parent()?;
        if fs::metadata(parent).ok()?.dev() != dev {
            return None;
        }
        dir = parent;
    }
}

/// Is `dir` an instance: does it hold a channel or aw's state (every instance aw makes has
/// `_state/`)? Other directories of a root are not instances.
fn is_instance_dir(dir: &Path) -> bool {
    dir.join("channel.md").is_file() || dir.join("_state").is_dir()
}

/// The instance name from `-i/--instance`, else `$AW_INSTANCE`, else `default`.
pub fn instance_name(arg: Option<&str>) -> String {
    match arg {
        Some(s) => s.to_string(),
        None => match std::env::var("AW_INSTANCE") {
            Ok(v) if !v.is_empty() => v,
            _ => DEFAULT_INSTANCE.to_string(),
        },
    }
}

/// One `.workflow/<instance>/` directory.
#[derive(Debug, Clone)]
pub struct Instance {
    name: String,
    dir: PathBuf,
    root: Root,
}

impl Instance {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn channel_path(&self) -> PathBuf {
        self.dir.join("channel.md")
    }
    pub fn documents_dir(&self) -> PathBuf {
        self.dir.join("documents")
    }
    pub fn resources_dir(&self) -> PathBuf {
        self.dir.join("resources")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("_state")
    }
    pub fn state_file(&self, name: &str) -> PathBuf {
        self.state_dir().join(name)
    }

    /// Does the instance exist: a directory with a channel or aw's state?
    pub fn exists(&self) -> bool {
        is_instance_dir(&self.dir)
    }

    /// Fail with exit 66 unless the instance exists: the error names the root absolutely
    /// and suggests an existing instance with a near name.
    pub fn require(&self) -> Result<()> {
        if self.exists() {
            return Ok(());
        }
        if let Some(why) = self.root.missing() {
            return Err(
                Error::not_found(format!("no such instance '{}': {why}", self.name))
                    .remedy(Remedy::ChooseRoot),
            );
        }
        Err(Error::not_found(format!(
            "no such instance '{}' under {}{}",
            self.name,
            self.root.path.display(),
            crate::suggest::suggestion(&self.name, self.siblings().iter().map(String::as_str))
        )))
    }

    /// The other instances of the root.
    fn siblings(&self) -> Vec<String> {
        self.root.instances().unwrap_or_default()
    }

    /// An existing instance whose name is near this missing one's (a small edit distance,
    /// or one name a prefix of the other): a write to this one is then likely a typo.
    ///
    /// Names that differ only in their digits (`run1` next to `run2`) are a numbered series,
    /// not a typo.
    pub fn near_existing(&self) -> Option<String> {
        if self.exists() {
            return None;
        }
        let letters = |n: &str| n.replace(|c: char| c.is_ascii_digit(), "");
        let mine = letters(&self.name);
        let others: Vec<String> = self
            .siblings()
            .into_iter()
            .filter(|o| letters(o) != mine)
            .collect();
        let near = crate::suggest::did_you_mean(&self.name, others.iter().map(String::as_str))
            .map(str::to_string);
        near.or_else(|| {
            others
                .into_iter()
                .find(|o| o.starts_with(&self.name) || self.name.starts_with(o.as_str()))
        })
    }

    /// Before a write that creates the instance: refuse it (exit 66, did-you-mean) when an
    /// existing instance has a near name, unless `create` says the new one is meant.
    /// Returns whether the write will create the instance.
    pub fn check_new(&self, create: bool) -> Result<bool> {
        if self.exists() {
            return Ok(false);
        }
        if !create && let Some(near) = self.near_existing() {
            return Err(Error::not_found(format!(
                "no such instance '{}' under {} (did you mean '{near}'?)",
                self.name,
                self.root.path.display()
            ))
            .remedy(Remedy::CreateInstance));
        }
        Ok(true)
    }

    /// Create the instance directory and its subdirectories if missing (first write). A
    /// root directory created here gets a `.gitignore` that ignores everything in it.
    pub fn create(&self) -> Result<()> {
        self.create_new().map(|_| ())
    }

    /// [`Instance::create`], saying whether this call created the instance directory.
    pub fn create_new(&self) -> Result<bool> {
        if self.state_dir().is_dir() {
            return Ok(false);
        }
        if !self.root.path.is_dir() {
            create_root(&self.root.path)?;
            // A root the search did not find is made here: refuse it if someone else's
            // appeared there meanwhile.
            if self.root.searched_from.is_some() {
                crate::trust::check_found(&self.root.path, &[])?;
            }
        }
        let made = match fs::create_dir(&self.dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(Error::create(&self.dir, e)),
        };
        for d in [self.documents_dir(), self.resources_dir(), self.state_dir()] {
            match fs::create_dir_all(&d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::create(&d, e)),
            }
        }
        Ok(made)
    }
}

/// Create a root directory (and its parents) with its `.gitignore`.
fn create_root(path: &Path) -> Result<()> {
    use std::io::Write;
    match fs::create_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::create(path, e)),
    }
    let ignore = path.join(".gitignore");
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&ignore)
    {
        Ok(mut f) => f
            .write_all(ROOT_GITIGNORE.as_bytes())
            .map_err(|e| Error::io(&ignore, e)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::create(&ignore, e)),
    }
}

/// A new instance `w` in a temporary directory, for unit tests (the directory goes with
/// the returned guard).
#[cfg(test)]
pub(crate) fn scratch() -> (tempfile::TempDir, Instance) {
    let dir = tempfile::tempdir().unwrap();
    let inst = Root::new(dir.path()).instance("w").unwrap();
    inst.create().unwrap();
    (dir, inst)
}
