//! Append-batch framing (extension section 4): `u32_be length` + payload,
//! repeated. Each frame becomes its own logical append.

use crate::error::Error;

/// A batch with more frames than allowed.
pub const TOO_MANY_FRAMES: Error = Error::TooLarge("more frames than --max-batch-frames");

/// Splits a batch body into frames, enforcing `max_frames`.
pub fn decode_frames(body: &[u8], max_frames: usize) -> Result<Vec<&[u8]>, Error> {
    let mut frames = Vec::new();
    let mut rest = body;
    if rest.is_empty() {
        return Err(Error::Invalid("append-batch body has no frames"));
    }
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(Error::Invalid("truncated frame length"));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len == 0 {
            return Err(Error::Invalid("zero-length frame"));
        }
        if tail.len() < len {
            return Err(Error::Invalid("frame payload shorter than its length"));
        }
        if frames.len() == max_frames {
            return Err(TOO_MANY_FRAMES);
        }
        frames.push(&tail[..len]);
        rest = &tail[len..];
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(p: &[u8]) -> Vec<u8> {
        let mut v = (p.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(p);
        v
    }

    #[test]
    fn frames_round_trip_and_errors() {
        let mut body = frame(b"abc");
        body.extend(frame(b"de"));
        assert_eq!(decode_frames(&body, 8), Ok(vec![&b"abc"[..], b"de"]));
        assert_eq!(decode_frames(&body, 1), Err(TOO_MANY_FRAMES));
        assert!(matches!(decode_frames(&body[..body.len() - 1], 8), Err(Error::Invalid(_))));
        assert!(matches!(decode_frames(&[0, 0, 0, 0], 8), Err(Error::Invalid(_))));
        assert!(matches!(decode_frames(&[0, 0], 8), Err(Error::Invalid(_))));
        assert!(matches!(decode_frames(&[], 8), Err(Error::Invalid(_))));
    }
}
