//! Files that hold secrets (a bearer token, a signing key, OAuth credentials, inferred shapes):
//! read only when no one else may, written so that no one else can read them or redirect the
//! write.

use std::path::Path;

/// The text of the file at `path`, read through the descriptor whose mode was checked; the
/// outer error is the file's absence or unreadability, the inner one a mode that lets others in
/// (`what` names the file in that message: "token file").
///
/// On Windows nothing is checked (there are no modes): such a file is private by where it is, a
/// folder under the user's profile, whose ACL lets in only the user, SYSTEM and the
/// administrators, and which a new file inherits.
pub fn read_private(path: &Path, what: &str) -> std::io::Result<Result<String, String>> {
    let mut file = std::fs::File::open(path)?;
    #[cfg(not(unix))]
    let _ = what;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata()?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Ok(Err(format!(
                "the {what} {} is open to other users (mode {mode:04o}); make it private with \
                 `chmod 600 {}`, and replace what it holds if others may have read it",
                path.display(),
                path.display()
            )));
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text)?;
    Ok(Ok(text))
}

/// Writes `bytes` to `path` so that no one else may read it (mode 0600) and no reader sees half
/// of it: into a new temporary file beside it, renamed over it.
///
/// The temporary file's name has 128 random bits, and it is opened with `O_CREAT|O_EXCL` and
/// `O_NOFOLLOW`: a file or symbolic link planted at that name (or any guess of it) makes the
/// write fail, and what it points to is never opened. The data is flushed to disk before the
/// rename. A symbolic link at `path` itself is replaced, not followed. The folder is made
/// private ([`private_dir`]).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the file has no folder"))?;
    private_dir(dir)?;
    let mut random = [0u8; 16];
    getrandom::fill(&mut random).map_err(|error| std::io::Error::other(error.to_string()))?;
    let random: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    let temporary = dir.join(format!(
        ".{}.{random}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
    ));
    let written = (|| {
        let mut out = create_new_private(&temporary)?;
        out.write_all(bytes)?;
        out.sync_all()?;
        drop(out);
        rename_over(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written?;
    // The rename itself reaches the disk with the folder's entry.
    #[cfg(unix)]
    if let Ok(folder) = std::fs::File::open(dir) {
        let _ = folder.sync_all();
    }
    Ok(())
}

/// Renames `from` over `to`. On Windows a rename over a file that someone has open (a reader,
/// a look at its metadata, a virus scanner, the search indexer, an MCP client reading its own
/// configuration) can be refused, as access denied or a sharing violation, where the holder
/// does not share deletion or the file system lacks POSIX rename semantics (FAT, network
/// shares, wine): such a refusal is tried again for about a second before it is an error.
pub(crate) fn rename_over(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(windows)]
    for wait in [1, 2, 5, 10, 20, 50, 100, 200, 300, 300] {
        match std::fs::rename(from, to) {
            Err(error) if held_open(&error) => {
                std::thread::sleep(std::time::Duration::from_millis(wait));
            }
            done => return done,
        }
    }
    std::fs::rename(from, to)
}

/// Whether a rename's error says that someone holds the file open: access denied (5), a
/// sharing violation (32) or a lock violation (33).
#[cfg(windows)]
fn held_open(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::PermissionDenied
        || matches!(error.raw_os_error(), Some(5 | 32 | 33))
}

/// A new file at `path`, mode 0600, opened for writing: never one that exists, and never
/// through a symbolic link (`O_CREAT|O_EXCL|O_NOFOLLOW`).
///
/// On Windows: `CREATE_NEW` with `FILE_FLAG_OPEN_REPARSE_POINT` (a link or junction planted at
/// the name is an existing file, never followed), and no mode: the file inherits its folder's
/// ACL (see [`read_private`]).
pub fn create_new_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        /// `FILE_FLAG_OPEN_REPARSE_POINT` (winbase.h).
        const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
        options.custom_flags(OPEN_REPARSE_POINT);
    }
    options.open(path)
}

/// Makes `dir` a folder only its owner may enter: the folders it creates on the way (the
/// missing ancestors too) are mode 0700. An existing `dir` must be a real folder (not a
/// symbolic link) owned by this user; one that others may read, enter or write (a folder made
/// 0755 by an older Runbyte, or by a umask of 002) is made 0700, with a warning.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let metadata = std::fs::symlink_metadata(dir)?;
        if !metadata.is_dir() {
            return Err(std::io::Error::other(format!(
                "{} is not a folder (a symbolic link?): private files are not written through it",
                dir.display()
            )));
        }
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if metadata.uid() != me {
            return Err(std::io::Error::other(format!(
                "{} belongs to another user (uid {}): private files are not written there",
                dir.display(),
                metadata.uid()
            )));
        }
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            tracing::warn!(
                "{} was open to other users (mode {mode:04o}); made it 0700",
                dir.display()
            );
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    /// A symbolic link planted at the name the writer used to use (`.<name>.<pid>.tmp`), at a
    /// guess of the new one, and at the file itself: the writer writes the file, 0600, in a
    /// 0700 folder (each missing ancestor 0700 too), and every link's target is untouched; a
    /// link at a temporary name is refused, not followed; a folder open to others is made
    /// private.
    #[test]
    fn a_planted_link_is_never_followed_and_the_file_is_private() {
        let root = std::env::temp_dir().join(format!("runbyte-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let victim = root.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();

        // A folder that does not exist yet, two levels deep.
        let dir = root.join("state/oauth");
        let path = dir.join("secure.json");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let old = dir.join(format!(".secure.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &old).unwrap();
        let guessed = dir.join(format!(".secure.json.{}.tmp", "0".repeat(32)));
        std::os::unix::fs::symlink(&victim, &guessed).unwrap();
        write_private(&path, b"{\"token\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(mode(&victim), 0o644);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"token\":1}");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir), 0o700, "an existing 0755 folder is made private");

        // The opener itself refuses a link (dangling or not) and an existing file.
        let error = create_new_private(&guessed).unwrap_err();
        assert!(
            matches!(error.kind(), std::io::ErrorKind::AlreadyExists),
            "{error}"
        );
        let dangling = dir.join(".dangling.tmp");
        std::os::unix::fs::symlink(root.join("would-be-created"), &dangling).unwrap();
        assert!(create_new_private(&dangling).is_err());
        assert!(!root.join("would-be-created").exists());

        // A link at the file itself is replaced, its target untouched.
        let linked = dir.join("linked.json");
        std::os::unix::fs::symlink(&victim, &linked).unwrap();
        write_private(&linked, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::fs::symlink_metadata(&linked).unwrap().is_symlink());
        assert_eq!(mode(&linked), 0o600);

        // Missing folders are made 0700, each of them.
        let deep = root.join("fresh/a/b/file.json");
        write_private(&deep, b"x").unwrap();
        for folder in ["fresh", "fresh/a", "fresh/a/b"] {
            assert_eq!(mode(&root.join(folder)), 0o700, "{folder}");
        }
        // No temporary file is left behind (only the planted links).
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|entry| !entry.file_type().unwrap().is_symlink())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");

        // A folder that is a link is refused.
        let link_dir = root.join("link-dir");
        std::os::unix::fs::symlink(&dir, &link_dir).unwrap();
        assert!(write_private(&link_dir.join("f.json"), b"x").is_err());
        let _ = std::fs::remove_dir_all(&root);
    }
}

#[cfg(all(test, windows))]
mod windows_tests {
    #![allow(clippy::unwrap_used)]
    use std::{
        os::windows::fs::OpenOptionsExt,
        time::{Duration, Instant},
    };

    use super::*;

    /// The target, open to someone who shares only reading (so no rename may replace it).
    fn held(path: &Path) -> std::fs::File {
        const FILE_SHARE_READ: u32 = 1;
        std::fs::OpenOptions::new()
            .read(true)
            .share_mode(FILE_SHARE_READ)
            .open(path)
            .unwrap()
    }

    /// A file held open for a moment (as a virus scanner or a reader holds it) is replaced once
    /// let go; one held for good is an error after about a second, the file as it was and no
    /// temporary file left behind.
    #[test]
    fn a_write_over_a_file_held_open_waits_for_it_then_gives_up() {
        let dir = std::env::temp_dir().join(format!("runbyte-held-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("pins.json");
        write_private(&path, b"old").unwrap();

        let holder = held(&path);
        // The condition itself: a plain rename over the held file is refused.
        let stray = dir.join("stray");
        std::fs::write(&stray, b"stray").unwrap();
        let refused = std::fs::rename(&stray, &path).unwrap_err();
        assert!(held_open(&refused), "{refused:?}");
        std::fs::remove_file(&stray).unwrap();
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(holder);
        });
        write_private(&path, b"new").unwrap();
        letting_go.join().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");

        let holder = held(&path);
        let started = Instant::now();
        let error = write_private(&path, b"newer").unwrap_err();
        let waited = started.elapsed();
        drop(holder);
        assert!(held_open(&error), "{error:?}");
        assert!(
            waited >= Duration::from_millis(500),
            "gave up after {waited:?}"
        );
        assert!(waited < Duration::from_secs(30), "waited {waited:?}");
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name != "pins.json")
            .collect();
        assert!(left.is_empty(), "{left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
