//! A gRPC call's request, read within bounds: one message of at most [`MAX_REQUEST_BYTES`],
//! all requests together within [`MAX_BODIES_BYTES`] (a request waits for room, then is
//! refused), a body that stalls given up; and decoded as the service refuses what it cannot
//! read (`INVALID_ARGUMENT`, never `INTERNAL`).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use gcloud_sdk::prost::Message;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::ProstCodec;

/// The largest request the server reads, as the service bounds its requests (10 MiB, with room
/// for the message's framing): a larger one is refused with `RESOURCE_EXHAUSTED`, unread.
pub const MAX_REQUEST_BYTES: usize = 11 << 20;

/// The largest REST request the server reads: JSON holds the 10 MiB the service takes in
/// more bytes (base64, names), so twice [`MAX_REQUEST_BYTES`].
pub const MAX_JSON_BYTES: usize = 2 * MAX_REQUEST_BYTES;

/// The most bytes of requests the server holds at once, all calls together: a request that
/// finds no room waits up to [`ROOM_WAIT`], then is refused with `RESOURCE_EXHAUSTED`. (Each
/// connection's unread data is bounded besides by HTTP/2's flow control, 1 MiB.)
pub const MAX_BODIES_BYTES: usize = 64 << 20;

/// How long a request waits for room among the others'.
pub const ROOM_WAIT: Duration = Duration::from_secs(10);

/// How long a request's body may stall (no bytes arriving) before the call is given up.
pub const BODY_STALL: Duration = Duration::from_secs(30);

/// The room for requests' bodies, in KiB.
#[derive(Clone)]
pub(crate) struct Room(Arc<Semaphore>);

impl Default for Room {
    fn default() -> Room {
        Room(Arc::new(Semaphore::new(MAX_BODIES_BYTES >> 10)))
    }
}

/// A request's one message, read, with the room it holds until the call is answered.
pub(crate) struct Read {
    pub(crate) bytes: Bytes,
    _room: Option<OwnedSemaphorePermit>,
}

/// The framing of a gRPC message: a compression flag, then its length (big-endian).
const PREFIX: usize = 5;

impl Room {
    /// Reads `body`: one gRPC message, whose room is taken as soon as its length is known.
    pub(crate) async fn read(&self, mut body: Incoming) -> Result<Read, Status> {
        let mut buffer = BytesMut::new();
        let mut room = None;
        let mut expected = None;
        loop {
            let Some(data) = next_data(&mut body).await? else {
                break;
            };
            buffer.extend_from_slice(&data);
            if expected.is_none() && buffer.len() >= PREFIX {
                let length = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]);
                let length = PREFIX.saturating_add(usize::try_from(length).unwrap_or(usize::MAX));
                if length > MAX_REQUEST_BYTES {
                    return Err(Status::resource_exhausted(format!(
                        "the request is larger than the {MAX_REQUEST_BYTES} bytes this server \
                         takes (the service takes requests of up to 10 MiB)"
                    )));
                }
                room = Some(self.take(length).await?);
                expected = Some(length);
            }
            if expected.is_some_and(|n| buffer.len() > n) {
                // As gRPC's Java servers (the emulators') refuse a second message of a unary call.
                return Err(Status::internal("Too many requests"));
            }
        }
        Ok(Read {
            bytes: buffer.freeze(),
            _room: room,
        })
    }

    /// Reads `body`: a REST call's JSON, of at most [`MAX_JSON_BYTES`], its room taken for
    /// the length it declares (`declared`), or for the most it may hold when it declares none.
    pub(crate) async fn read_json(
        &self,
        mut body: Incoming,
        declared: Option<usize>,
    ) -> Result<Read, Status> {
        let too_large = || {
            Status::resource_exhausted(format!(
                "the request is larger than the {MAX_JSON_BYTES} bytes of JSON this server takes \
                 (the service takes requests of up to 10 MiB)"
            ))
        };
        let expected = declared.unwrap_or(MAX_JSON_BYTES);
        if expected > MAX_JSON_BYTES {
            return Err(too_large());
        }
        let room = self.take(expected.max(1)).await?;
        let mut buffer = BytesMut::new();
        loop {
            let Some(data) = next_data(&mut body).await? else {
                break;
            };
            buffer.extend_from_slice(&data);
            if buffer.len() > expected {
                return Err(too_large());
            }
        }
        Ok(Read {
            bytes: buffer.freeze(),
            _room: Some(room),
        })
    }

    /// Room for `bytes`, waiting for it up to [`ROOM_WAIT`]. Not in a queue: a small
    /// request takes the room there is though larger ones wait for more.
    async fn take(&self, bytes: usize) -> Result<OwnedSemaphorePermit, Status> {
        let kib = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX);
        let deadline = tokio::time::Instant::now() + ROOM_WAIT;
        loop {
            if let Ok(room) = Arc::clone(&self.0).try_acquire_many_owned(kib) {
                return Ok(room);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Status::resource_exhausted(format!(
                    "the server holds {} MiB of requests at once, and others fill it: retry",
                    MAX_BODIES_BYTES >> 20
                )));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The next bytes of `body` (`None` at its end), given up when it stalls for [`BODY_STALL`].
async fn next_data(body: &mut Incoming) -> Result<Option<Bytes>, Status> {
    loop {
        let frame = match tokio::time::timeout(BODY_STALL, body.frame()).await {
            Err(_) => {
                return Err(Status::cancelled(format!(
                    "the request's body stalled for {} s",
                    BODY_STALL.as_secs()
                )));
            }
            Ok(None) => return Ok(None),
            Ok(Some(Err(error))) => {
                return Err(Status::cancelled(format!("the request was cut: {error}")));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            return Ok(Some(data));
        }
    }
}

/// Prost's codec, but a message that cannot be decoded is the client's error
/// (`INVALID_ARGUMENT`, as the service answers), not the server's.
pub(crate) struct Checked<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for Checked<T, U> {
    fn default() -> Self {
        Checked(PhantomData)
    }
}

impl<T, U> Codec for Checked<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = CheckedDecoder<<ProstCodec<T, U> as Codec>::Decoder>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::default().encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        CheckedDecoder(ProstCodec::<T, U>::default().decoder())
    }
}

pub(crate) struct CheckedDecoder<D>(D);

impl<D: Decoder<Error = Status>> Decoder for CheckedDecoder<D> {
    type Item = D::Item;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<D::Item>, Status> {
        self.0.decode(src).map_err(|status| {
            let error = status.message();
            if error.contains("recursion limit") {
                // Far past the nesting the service takes (Firestore's message).
                return Status::invalid_argument("At most 20 nested entity values are supported.");
            }
            let mut end = error.len().min(200);
            while !error.is_char_boundary(end) {
                end -= 1;
            }
            let cut = if end < error.len() { "…" } else { "" };
            Status::invalid_argument(format!(
                "The request is not a valid message: {}{cut}",
                &error[..end]
            ))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
