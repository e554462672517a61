//! Files that hold secrets (a bearer token, a signing key): read only when no one else may.

use std::path::Path;

/// The text of the file at `path`, read through the descriptor whose mode was checked; the
/// outer error is the file's absence or unreadability, the inner one a mode that lets others in
/// (`what` names the file in that message: "token file").
pub fn read_private(path: &Path, what: &str) -> std::io::Result<Result<String, String>> {
    let mut file = std::fs::File::open(path)?;
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
