// PATCH (tint, vendor/README.md): the protocol of a build without the `websocket` feature. The local
// server names a network protocol for its global (several-node) client; without `websocket` no
// protocol exists, so this one stands in. It has no values: no global client can be built, and a
// configuration that asks for several nodes is refused at registration.
use burn_communication::{
    Address, CommunicationChannel, CommunicationError, Message, Protocol, ProtocolClient,
    ProtocolServer,
};
use burn_std::future::DynFut;
use std::future::Future;

/// A protocol without a network.
#[derive(Clone)]
pub(crate) struct NoNetwork;

/// No value of this type exists.
#[derive(Debug)]
pub(crate) enum Never {}

impl CommunicationError for Never {}

impl Protocol for NoNetwork {
    type Client = Never;
    type Server = Never;
}

impl ProtocolClient for Never {
    type Channel = Never;
    type Error = Never;

    fn connect(_address: Address, _route: &str) -> DynFut<Option<Self::Channel>> {
        Box::pin(async { None })
    }
}

impl ProtocolServer for Never {
    type Channel = Never;
    type Error = Never;

    fn route<C, Fut>(self, _path: &str, _callback: C) -> Self
    where
        C: FnOnce(Self::Channel) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        match self {}
    }

    #[allow(clippy::manual_async_fn)]
    fn serve<F>(self, _shutdown: F) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static
    where
        F: Future<Output = ()> + Send + 'static,
    {
        async move { match self {} }
    }
}

impl CommunicationChannel for Never {
    type Error = Never;

    #[allow(clippy::manual_async_fn)]
    fn send(&mut self, _message: Message) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async move { match *self {} }
    }

    #[allow(clippy::manual_async_fn)]
    fn recv(&mut self) -> impl Future<Output = Result<Option<Message>, Self::Error>> + Send {
        async move { match *self {} }
    }

    #[allow(clippy::manual_async_fn)]
    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async move { match *self {} }
    }
}
