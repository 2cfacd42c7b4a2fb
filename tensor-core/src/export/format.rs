//! The container of an exported function (`docs/EXPORT.md`): a fixed header, the graph as
//! UTF-8 JSON, and the tensors as a safetensors file. The header holds the format version,
//! both sections' lengths and a CRC-32 of each, so a truncated file, a changed byte or a
//! file of a newer version is found before anything is parsed.

/// The first bytes of every exported file.
pub(super) const MAGIC: [u8; 8] = *b"TCGRAPH\0";

/// The version this build writes and the newest it reads.
pub const VERSION: u32 = 1;

/// Header bytes: magic, version, flags, two lengths, two checksums.
pub(super) const HEADER_LEN: usize = 8 + 4 + 4 + 8 + 8 + 4 + 4;

/// Why a container could not be opened.
#[derive(Debug, PartialEq)]
pub(super) enum OpenError {
    /// Written by a newer version of the format.
    Newer(u32),
    /// Not a container of this format, or damaged.
    Bad(String),
}

/// The file's bytes for a graph section and a tensor section.
pub(super) fn seal(graph: &[u8], tensors: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + graph.len() + tensors.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(graph.len() as u64).to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(graph).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(tensors).to_le_bytes());
    out.extend_from_slice(graph);
    out.extend_from_slice(tensors);
    out
}

/// The graph and tensor sections of a file, after checking its header and checksums.
pub(super) fn open(bytes: &[u8]) -> Result<(&[u8], &[u8]), OpenError> {
    let bad = |why: &str| OpenError::Bad(why.to_string());
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(bad("it does not start as a tensor-core graph file does"));
    }
    if bytes.len() < HEADER_LEN {
        return Err(OpenError::Bad(format!("it is {} bytes long, shorter than the {HEADER_LEN}-byte header (truncated)", bytes.len())));
    }
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    match u32_at(8) {
        0 => return Err(bad("its version is 0, which no tensor-core writes")),
        v if v > VERSION => return Err(OpenError::Newer(v)),
        _ => {}
    }
    if u32_at(12) != 0 {
        return Err(bad("its header's flags are set, which this version does not use"));
    }
    let (graph_len, tensors_len) = (u64_at(16), u64_at(24));
    let expected = (HEADER_LEN as u64).checked_add(graph_len).and_then(|n| n.checked_add(tensors_len));
    if expected != Some(bytes.len() as u64) {
        return Err(OpenError::Bad(format!(
            "its header announces {graph_len} + {tensors_len} bytes of sections, but {} follow (truncated or padded)",
            bytes.len() - HEADER_LEN
        )));
    }
    let (graph, tensors) = bytes[HEADER_LEN..].split_at(graph_len as usize);
    if crc32fast::hash(graph) != u32_at(32) {
        return Err(bad("its graph section does not match its checksum (changed or damaged since it was written)"));
    }
    if crc32fast::hash(tensors) != u32_at(36) {
        return Err(bad("its tensor section does not match its checksum (changed or damaged since it was written)"));
    }
    Ok((graph, tensors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_file_opens_to_its_sections() {
        let file = seal(b"{}", b"tensors");
        assert_eq!(open(&file), Ok((&b"{}"[..], &b"tensors"[..])));
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_found() {
        let file = seal(br#"{"graph": 1}"#, b"0123456789");
        for len in 0..file.len() {
            assert!(matches!(open(&file[..len]), Err(OpenError::Bad(_))), "truncated to {len}");
        }
        for at in 0..file.len() {
            for bit in 0..8 {
                let mut bad = file.clone();
                bad[at] ^= 1 << bit;
                assert!(open(&bad).is_err(), "byte {at} bit {bit}");
            }
        }
    }

    #[test]
    fn a_newer_version_is_named() {
        let mut file = seal(b"{}", b"");
        file[8..12].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(open(&file), Err(OpenError::Newer(7)));
    }
}
