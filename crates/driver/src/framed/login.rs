//! A login on a [`Framed`] connection: the family writes its login, the broker's first frames
//! answer it.

use std::time::Instant;

use super::{Framed, Framing};
use crate::net::{while_logging_in, ConnectError};
use crate::tls::TlsSettings;

/// What a login's answer is made of: each frame that comes gives the login's result, or None
/// (a frame to pass over).
pub type Answer<'a, P, T> =
    dyn FnMut(<P as Framing>::Frame<'_>) -> Option<Result<T, ConnectError>> + 'a;

impl Framed {
    /// Sends the login written in the buffer, then hands each frame that comes to `answer`
    /// until it gives the login's result (None: a frame to pass over), by `deadline`; the
    /// error `unanswered` when nothing answers by then. A connection lost meanwhile is
    /// unreachable "while logging in" (with TLS, after the handshake: see
    /// [`while_logging_in`]).
    pub fn log_in<P: Framing, T>(
        &mut self,
        tls: Option<&TlsSettings>,
        deadline: Instant,
        unanswered: String,
        answer: &mut Answer<'_, P, T>,
    ) -> Result<T, ConnectError> {
        let lost = |e: String| while_logging_in(tls, ConnectError::Unreachable(e));
        self.flush().map_err(|e| lost(e.to_string()))?;
        let mut result = None;
        while result.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ConnectError::Protocol(unanswered));
            }
            self.poll::<P>(left, &mut |frame, _| {
                if result.is_none() {
                    result = answer(frame);
                }
                Ok(())
            })
            .map_err(lost)?;
        }
        result
            .expect("the loop ends with an answer")
            .map_err(|e| while_logging_in(tls, e))
    }
}
