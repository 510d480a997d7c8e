//! Where the file tools may go: the working folder, opened once, and every path given resolved
//! inside it (see the confinement rules of [`super`]). The operations are in `ops`.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag, fstatat};

use crate::error::{Error, Result};
use crate::fs::Dir;
use crate::fs::beneath::{Kind, is_symlink_error};
use crate::names::sanitize;

/// The names of the folders the tools never reach, wherever they are: git's, and the aw
/// root every aw tool run in their parent would use by default.
const HIDDEN_NAMES: [&str; 2] = [".git", crate::instance::DEFAULT_ROOT];

fn hidden_name(name: &str) -> bool {
    HIDDEN_NAMES.contains(&name)
}

/// The folder the tools are confined to.
pub struct Sandbox {
    /// The folder's real path, for resolving the paths given.
    root: PathBuf,
    /// The folder, open: every file is opened beneath it.
    pub(super) dir: Dir,
    /// Folders and files never reached, absolute (real paths when they exist): the aw root,
    /// or the instance directory when the folder lies inside the aw root; and what git uses
    /// for the work tree the folder lies in, whatever its name (see
    /// [`crate::git::private_paths`]).
    hidden: Vec<PathBuf>,
    /// The folder's path relative to the work tree whose paths leases name (empty for its
    /// top, and when the folder lies outside it).
    in_tree: String,
}

/// A path that was given, resolved inside the sandbox.
pub(super) struct Found {
    /// The real path, relative to the sandbox's root (empty for the root itself).
    pub(super) rel: String,
    pub(super) kind: Kind,
    /// The path as given, cleaned of `.` and empty components, for output.
    pub(super) shown: String,
}

impl Sandbox {
    /// `cwd` must exist and be a directory (canonicalized once), and lie neither inside the
    /// instance directory `instance` nor inside a `.git` or `.workflow` folder. The aw root
    /// `aw_root` is never reached; when `cwd` lies inside it (the instance directory of a
    /// workflow's `context.config.dir` in the current directory), the instance directory is
    /// not.
    pub fn new(cwd: &Path, aw_root: &Path, instance: &Path) -> Result<Sandbox> {
        let root = std::fs::canonicalize(cwd).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => {
                Error::not_found(format!("{}: no such folder", cwd.display()))
            }
            _ => Error::io(cwd, e),
        })?;
        if !root.is_dir() {
            return Err(Error::invalid(format!("{}: not a folder", cwd.display())));
        }
        let dir = Dir::open(&root).map_err(|e| Error::io(cwd, e))?;
        let aw_root = real_path(aw_root).map_err(|e| Error::io(aw_root, e))?;
        let instance = real_path(instance).map_err(|e| Error::io(instance, e))?;
        let git: Vec<PathBuf> = crate::git::private_paths(&root)
            .iter()
            .filter_map(|p| real_path(p).ok())
            .collect();
        let inside_hidden = root
            .components()
            .any(|c| c.as_os_str().to_str().is_some_and(hidden_name))
            || git.iter().any(|g| root.starts_with(g));
        if root.starts_with(&instance) || inside_hidden {
            return Err(Error::denied(format!(
                "{}: the file tools may not work inside an aw instance or a .git folder",
                cwd.display()
            )));
        }
        let tree = crate::lease::tree::work_tree(&aw_root, &root);
        let mut hidden = if root.starts_with(&aw_root) {
            vec![instance]
        } else {
            vec![aw_root]
        };
        hidden.extend(git);
        let in_tree = root
            .strip_prefix(&tree)
            .ok()
            .and_then(Path::to_str)
            .unwrap_or_default()
            .to_string();
        Ok(Sandbox {
            root,
            dir,
            hidden,
            in_tree,
        })
    }

    /// `given` as a lease names it: relative to the work tree.
    pub fn tree_path(&self, given: &str) -> Result<String> {
        Ok(join(&self.in_tree, &parts(given)?.join("/")))
    }

    /// The devices and inodes of the hidden folders that exist.
    fn hidden_ids(&self) -> Vec<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        self.hidden
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect()
    }

    /// Is `rel` (relative to the root) a hidden folder, by its name, its path or what it is?
    fn is_hidden(&self, name: &str, rel: &str, ids: &[(u64, u64)]) -> bool {
        hidden_name(name)
            || self.hidden.iter().any(|h| self.root.join(rel) == *h)
            || (!ids.is_empty() && self.id_of(rel).is_some_and(|id| ids.contains(&id)))
    }

    /// Refuse `rel` (a real path relative to the root, what exists of it with no symbolic
    /// link) when it is, or lies under, a hidden folder.
    pub(super) fn guard(&self, given: &str, rel: &str) -> Result<()> {
        let ids = self.hidden_ids();
        let mut prefix = String::new();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            prefix = join(&prefix, part);
            if self.is_hidden(part, &prefix, &ids) {
                return Err(out_of_reach(given));
            }
        }
        Ok(())
    }

    /// The device and inode of `rel` (relative to the root), without following a final
    /// symbolic link; `None` when missing.
    fn id_of(&self, rel: &str) -> Option<(u64, u64)> {
        let st = fstatat(self.dir.fd(), rel, AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        #[allow(clippy::useless_conversion)]
        Some((u64::from(st.st_dev), u64::from(st.st_ino)))
    }

    /// Resolve `given` to a real path inside the sandbox, and see what is there.
    pub(super) fn find(&self, given: &str) -> Result<Found> {
        let shown = parts(given)?.join("/");
        let real = std::fs::canonicalize(self.root.join(&shown)).map_err(|e| io_error(given, e))?;
        let rel = self.inside(given, &real)?;
        self.guard(given, &rel)?;
        let kind = stat_at(&self.dir, &rel)
            .map_err(|e| io_error(given, e))?
            .ok_or_else(|| changed(given))?
            .0;
        Ok(Found { rel, kind, shown })
    }

    /// `real` relative to the sandbox's root, when it lies inside.
    fn inside(&self, given: &str, real: &Path) -> Result<String> {
        let rel = real.strip_prefix(&self.root).map_err(|_| {
            Error::denied(format!(
                "{}: leads outside the working folder (through a symbolic link)",
                sanitize(given)
            ))
        })?;
        rel.to_str().map(str::to_string).ok_or_else(|| {
            Error::invalid(format!(
                "{}: its real path is not valid UTF-8",
                sanitize(given)
            ))
        })
    }

    /// Open the folder that holds the file `given`, whose folders are `folders`, creating
    /// those missing. The longest part that exists is resolved (it must stay inside); the
    /// rest is created beneath it, through no symbolic link.
    pub(super) fn folder(&self, given: &str, folders: &[&str]) -> Result<(Dir, String)> {
        let mut have = folders.len();
        let real = loop {
            match std::fs::canonicalize(self.root.join(folders[..have].join("/"))) {
                Ok(real) => break real,
                Err(e) if e.kind() == io::ErrorKind::NotFound && have > 0 => have -= 1,
                Err(e) => return Err(io_error(given, e)),
            }
        };
        let mut rel = self.inside(given, &real)?;
        for part in &folders[have..] {
            rel = join(&rel, part);
        }
        self.guard(given, &rel)?;
        let dir = if have == folders.len() {
            self.open_dir(&rel)
        } else {
            self.dir.dir_create(&rel)
        };
        Ok((dir.map_err(|e| io_error(given, e))?, rel))
    }

    /// The folder `rel` (real, relative to the root; empty for the root), opened beneath the
    /// root.
    pub(super) fn open_dir(&self, rel: &str) -> io::Result<Dir> {
        self.dir.dir(if rel.is_empty() { "." } else { rel })
    }

    /// The regular file `rel`, opened beneath the root without blocking.
    pub(super) fn open_file(&self, given: &str, rel: &str) -> Result<File> {
        let f = self
            .dir
            .open_file(rel, OFlag::O_RDONLY | OFlag::O_NONBLOCK, Mode::empty())
            .map_err(|e| io_error(given, e))?;
        match Kind::of_file(&f).map_err(|e| io_error(given, e))? {
            Kind::File => Ok(f),
            Kind::Dir => Err(is_a_folder(given, "use list_files")),
            _ => Err(not_regular(given)),
        }
    }

    /// Visit what lies in the folder `found`, sorted by name, depth first when `recursive`.
    /// Symbolic links are visited, never followed; `.git` folders and the aw root are left
    /// out; a folder that cannot be read below the first is passed over. `visit` returns false to stop.
    pub(super) fn walk(
        &self,
        given: &str,
        found: &Found,
        recursive: bool,
        visit: &mut dyn FnMut(&Entry) -> bool,
    ) -> Result<()> {
        let ids = self.hidden_ids();
        let first = self.entries(&found.rel).map_err(|e| io_error(given, e))?;
        let mut stack = vec![(found.rel.clone(), found.shown.clone(), first.into_iter())];
        while let Some((rel, shown, names)) = stack.last_mut() {
            let Some((name, kind)) = names.next() else {
                stack.pop();
                continue;
            };
            let (name, exact) = match name.into_string() {
                Ok(s) => (s, true),
                Err(raw) => (raw.to_string_lossy().into_owned(), false),
            };
            let e = Entry {
                rel: join(rel, &name),
                shown: join(shown, &name),
                kind,
            };
            // A `.git` file (a work tree's pointer to its repository) is left out too, and so
            // is a configuration file of git's; folders are also known by device and inode.
            let ids: &[(u64, u64)] = if kind == Kind::Dir { &ids } else { &[] };
            if self.is_hidden(&name, &e.rel, ids) {
                continue;
            }
            if !visit(&e) {
                return Ok(());
            }
            if recursive
                && exact
                && kind == Kind::Dir
                && let Ok(below) = self.entries(&e.rel)
            {
                stack.push((e.rel, e.shown, below.into_iter()));
            }
        }
        Ok(())
    }

    /// The entries of the folder `rel`, sorted by name.
    pub(super) fn entries(&self, rel: &str) -> io::Result<Vec<(std::ffi::OsString, Kind)>> {
        let mut list = self.open_dir(rel)?.entries()?;
        list.sort();
        Ok(list)
    }
}

/// One entry met by [`Sandbox::walk`].
pub(super) struct Entry {
    /// Its real path, relative to the root.
    pub(super) rel: String,
    /// Its path as shown: under the path given.
    pub(super) shown: String,
    pub(super) kind: Kind,
}

/// The real path of `path`, or when it does not exist (yet), that of its nearest existing
/// ancestor with the rest appended.
fn real_path(path: &Path) -> io::Result<PathBuf> {
    let path = std::path::absolute(path)?;
    let mut rest = Vec::new();
    let mut at = path.as_path();
    loop {
        match std::fs::canonicalize(at) {
            Ok(mut real) => {
                real.extend(rest.iter().rev());
                return Ok(real);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else {
                    return Err(e);
                };
                rest.push(name);
                at = parent;
            }
            Err(e) => return Err(e),
        }
    }
}

/// `path` then `name`, with no `/` in front when `path` is empty.
pub(super) fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}/{name}")
    }
}

/// The components of a path given: refuses an absolute path, `..` and NUL; leaves out `.`
/// and empty components (so `""` and `.` have none: the working folder).
pub(super) fn parts(given: &str) -> Result<Vec<&str>> {
    let why = if given.starts_with('/') {
        "absolute paths are refused; give a path relative to the working folder"
    } else if given.contains('\0') {
        "a path may not hold a NUL character"
    } else if given.split('/').any(|c| c == "..") {
        "'..' is refused: paths stay inside the working folder"
    } else {
        return Ok(given
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect());
    };
    Err(Error::denied(format!("{}: {why}", sanitize(given))))
}

/// What `name` (a path relative to `dir`, empty for `dir` itself) is, without following a
/// final symbolic link, and its permission bits; `None` when missing.
pub(super) fn stat_at(dir: &Dir, name: &str) -> io::Result<Option<(Kind, Mode)>> {
    let name = if name.is_empty() { "." } else { name };
    match fstatat(dir.fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let kind = match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
                SFlag::S_IFREG => Kind::File,
                SFlag::S_IFDIR => Kind::Dir,
                SFlag::S_IFLNK => Kind::Symlink,
                _ => Kind::Other,
            };
            Ok(Some((kind, Mode::from_bits_truncate(st.st_mode & 0o7777))))
        }
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// An I/O error about the path `given`, in one line that names only it.
pub(super) fn io_error(given: &str, e: io::Error) -> Error {
    let p = sanitize(given);
    if is_symlink_error(&e) {
        return Error::denied(format!(
            "{p}: refused: a symbolic link on the way loops, leads nowhere or changed"
        ));
    }
    match e.kind() {
        io::ErrorKind::NotFound => Error::not_found(format!("{p}: no such file or folder")),
        io::ErrorKind::NotADirectory => {
            Error::not_found(format!("{p}: a part of the path is not a folder"))
        }
        io::ErrorKind::PermissionDenied => Error::denied(format!("{p}: permission denied")),
        _ => Error::io(PathBuf::from(p), e),
    }
}

pub(super) fn is_a_folder(given: &str, what: &str) -> Error {
    Error::invalid(format!("{}: is a folder; {what}", sanitize(given)))
}

pub(super) fn not_regular(given: &str) -> Error {
    Error::denied(format!(
        "{}: not a regular file or folder (a device, FIFO or socket)",
        sanitize(given)
    ))
}

/// A path that reaches the aw root or a `.git` folder: refused like a `..`.
fn out_of_reach(given: &str) -> Error {
    Error::denied(format!(
        "{}: refused: the aw root and .git folders are out of reach of the file tools",
        sanitize(given)
    ))
}

pub(super) fn changed(given: &str) -> Error {
    Error::denied(format!(
        "{}: changed while being looked at; try again",
        sanitize(given)
    ))
}
