//! Service loops run by a [`ServiceManager`].
//!
//! A [`ServiceTask`] is a wakeup-driven loop (`run` until
//! [`ServiceTaskContext::is_stopped`], parking in
//! [`ServiceTaskContext::wait_for_running`] between rounds). A
//! [`ServiceManager`] runs it as a service task of a child component
//! (`rocketmq.service-manager`) of the group it was given, tracks its
//! [`ServiceTaskState`] in one atomic word and shuts it down within a
//! deadline.

mod service_task;

pub use service_task::{ServiceManager, ServiceTask, ServiceTaskContext, ServiceTaskState};
