use rocketmq_runtime::{ChildServiceContext, RootServiceContext, RuntimeOwner};

fn main() {
    let owner = RuntimeOwner::new().unwrap();
    let child: ChildServiceContext = owner.root_context().component("broker");
    let _root: RootServiceContext = child.into();
}
