//! cond and while_loop: eager and traced, the seed's counter, nesting, value-dependent trip
//! counts, gradients (against finite differences and the eager run), and every error.

use tensor_core::control::while_loop;
use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;

fn counter(first: &Tensor, second: &Tensor) -> Result<Vec<Tensor>> {
    let (a, b) = while_loop(|(a, b): &(Tensor, Tensor)| Ok(a.lt(b)), |(a, b)| Ok((&a + 2, &b + 1)), (first.clone(), second.clone()))?;
    Ok(vec![a, b])
}

#[test]
fn the_seed_counter_is_one_while_node_and_reuses_its_trace() -> Result<()> {
    let (first, second) = (Tensor::scalar(0i32), Tensor::scalar(10i32));
    let eager = counter(&first, &second)?;
    assert_eq!((eager[0].item::<i32>()?, eager[1].item::<i32>()?), (20, 20));
    let f = ConcreteFunction::trace("counter", &[("first", &first), ("second", &second)], || counter(&first, &second))?;
    assert_eq!(f.traced_graph().count_op("while"), 1, "{}", f.traced_graph().to_text());
    let out = f.call(&[&first, &second])?;
    assert_eq!((out[0].item::<i32>()?, out[1].item::<i32>()?), (20, 20));
    let out = f.call(&[&Tensor::scalar(0i32), &Tensor::scalar(3i32)])?;
    assert_eq!((out[0].item::<i32>()?, out[1].item::<i32>()?), (6, 6));
    Ok(())
}
