//! Creating a SCRAM user on a running broker (KRaft keeps SCRAM credentials in its metadata
//! log; they are set through the AlterUserScramCredentials admin request, which rust-rdkafka
//! does not wrap). Used by the managed broker's `up --tls`.

use std::ffi::{CStr, CString};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::Client;
use rdkafka::ClientContext;

/// Kafka's minimum number of SCRAM iterations, and the Java tools' default.
const ITERATIONS: i32 = 4096;

/// Sets `user`'s SCRAM-SHA-256 and SCRAM-SHA-512 credentials to `password` (a random salt
/// each), through `client`'s connection to the broker.
pub fn upsert_user<C: ClientContext>(
    client: &Client<C>,
    user: &str,
    password: &str,
    timeout: Duration,
) -> Result<(), String> {
    // The broker refuses two alterations of one user in a request: one request each.
    for mechanism in [
        rd::rd_kafka_ScramMechanism_t::RD_KAFKA_SCRAM_MECHANISM_SHA_256,
        rd::rd_kafka_ScramMechanism_t::RD_KAFKA_SCRAM_MECHANISM_SHA_512,
    ] {
        upsert(client, user, password, mechanism, timeout)?;
    }
    Ok(())
}

fn upsert<C: ClientContext>(
    client: &Client<C>,
    user: &str,
    password: &str,
    mechanism: rd::rd_kafka_ScramMechanism_t,
    timeout: Duration,
) -> Result<(), String> {
    let name = CString::new(user).map_err(|_| format!("user name {user:?} holds a NUL byte"))?;
    let mechanisms = [mechanism];
    // SAFETY: every pointer handed to librdkafka is live for the call: the client while
    // `client` is borrowed, the name and password for the whole function. The alterations
    // are destroyed after the request has copied them; the queue and the event are destroyed
    // once read, and the result's strings are copied out before that.
    unsafe {
        let rk = client.native_ptr();
        let mut alterations: Vec<*mut rd::rd_kafka_UserScramCredentialAlteration_t> = mechanisms
            .iter()
            .map(|&mechanism| {
                rd::rd_kafka_UserScramCredentialUpsertion_new(
                    name.as_ptr(),
                    mechanism,
                    ITERATIONS,
                    password.as_ptr(),
                    password.len(),
                    std::ptr::null(),
                    0,
                )
            })
            .collect();
        if alterations.iter().any(|a| a.is_null()) {
            rd::rd_kafka_UserScramCredentialAlteration_destroy_array(
                alterations.as_mut_ptr(),
                alterations.len(),
            );
            return Err("librdkafka could not build the SCRAM credentials".into());
        }
        let queue = rd::rd_kafka_queue_new(rk);
        rd::rd_kafka_AlterUserScramCredentials(
            rk,
            alterations.as_mut_ptr(),
            alterations.len(),
            std::ptr::null(),
            queue,
        );
        rd::rd_kafka_UserScramCredentialAlteration_destroy_array(
            alterations.as_mut_ptr(),
            alterations.len(),
        );
        let event = rd::rd_kafka_queue_poll(queue, timeout.as_millis() as i32);
        let outcome = if event.is_null() {
            Err(format!(
                "no answer to the SCRAM credential request within {timeout:?}"
            ))
        } else {
            read_outcome(event)
        };
        if !event.is_null() {
            rd::rd_kafka_event_destroy(event);
        }
        rd::rd_kafka_queue_destroy(queue);
        outcome
    }
}

/// The request's error, or the first user's.
///
/// # Safety
/// `event` must be a live AlterUserScramCredentials result event.
unsafe fn read_outcome(event: *mut rd::rd_kafka_event_t) -> Result<(), String> {
    if rd::rd_kafka_event_error(event) != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Err(text(rd::rd_kafka_event_error_string(event)));
    }
    let result = rd::rd_kafka_event_AlterUserScramCredentials_result(event);
    if result.is_null() {
        return Err("the broker's answer was not a SCRAM credential result".into());
    }
    let mut count = 0usize;
    let responses = rd::rd_kafka_AlterUserScramCredentials_result_responses(result, &mut count);
    for i in 0..count {
        let error = rd::rd_kafka_AlterUserScramCredentials_result_response_error(*responses.add(i));
        if !error.is_null()
            && rd::rd_kafka_error_code(error) != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
        {
            return Err(text(rd::rd_kafka_error_string(error)));
        }
    }
    Ok(())
}

/// # Safety
/// `pointer` is null or a NUL-terminated string.
unsafe fn text(pointer: *const std::os::raw::c_char) -> String {
    if pointer.is_null() {
        "unknown error".into()
    } else {
        CStr::from_ptr(pointer).to_string_lossy().into_owned()
    }
}
