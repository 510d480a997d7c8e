//! The root directory and the instance directories inside it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::names::{self, DEFAULT_INSTANCE};

/// Name of the root directory under the current directory when none is given.
pub const DEFAULT_ROOT: &str = ".workflow";

/// The root directory holding instances (`.workflow/`, `--root`, `AW_ROOT`).
#[derive(Debug, Clone)]
pub struct Root {
    path: PathBuf,
}

impl Root {
    /// `--root DIR` if given, else `$AW_ROOT` if set and non-empty, else `./.workflow`.
    pub fn resolve(arg: Option<&Path>) -> Root {
        let path = match arg {
            Some(p) => p.to_path_buf(),
            None => match std::env::var_os("AW_ROOT") {
                Some(v) if !v.is_empty() => PathBuf::from(v),
                _ => PathBuf::from(DEFAULT_ROOT),
            },
        };
        Root { path }
    }

    pub fn new(path: impl Into<PathBuf>) -> Root {
        Root { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The instance called `name` (validated; it need not exist yet).
    pub fn instance(&self, name: &str) -> Result<Instance> {
        names::check_instance(name)?;
        Ok(Instance {
            name: name.to_string(),
            dir: self.path.join(name),
        })
    }

    /// Names of the existing instances, sorted.
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
            if names::is_instance_name(&name) && de.file_type().map(|t| t.is_dir()).unwrap_or(false)
            {
                out.push(name);
            }
        }
        out.sort();
        Ok(out)
    }
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

    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// Fail with exit 66 unless the instance exists.
    pub fn require(&self) -> Result<()> {
        if self.exists() {
            Ok(())
        } else {
            Err(Error::not_found(format!(
                "no such instance '{}' under {}",
                self.name,
                self.dir.parent().unwrap_or(Path::new(".")).display()
            )))
        }
    }

    /// Create the instance directory and its subdirectories if missing (first write).
    pub fn create(&self) -> Result<()> {
        if self.state_dir().is_dir() {
            return Ok(());
        }
        for d in [
            self.dir.clone(),
            self.documents_dir(),
            self.resources_dir(),
            self.state_dir(),
        ] {
            match fs::create_dir_all(&d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::create(&d, e)),
            }
        }
        Ok(())
    }
}
