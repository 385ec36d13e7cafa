use rocketmq_runtime::{RootServiceContext, RuntimeOwner};

fn main() {
    let owner = RuntimeOwner::new().unwrap();
    let _owned: RootServiceContext = owner.root_context().clone();
}
