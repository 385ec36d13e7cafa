use rocketmq_runtime::{ChildServiceContext, RuntimeOwner};

fn main() {
    let owner = RuntimeOwner::new().unwrap();
    let group = owner.root_context().component("broker").task_group().clone();
    let _by_new = ChildServiceContext::new(group.clone());
    let _by_literal = ChildServiceContext { group };
}
