//! TEMPORARY placeholder until the argshash branch is merged.
#![allow(missing_docs)]
#[derive(Debug)]
pub struct ArgsHashError(String);
impl std::fmt::Display for ArgsHashError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ArgsHashError {}
pub fn args_hash<T: serde::Serialize + ?Sized>(v: &T) -> Result<String, ArgsHashError> {
    use sha1::Digest;
    let s = serde_json::to_vec(v).map_err(|e| ArgsHashError(e.to_string()))?;
    let d = sha1::Sha1::digest(&s);
    Ok(d.iter().take(6).map(|b| format!("{b:02x}")).collect())
}
