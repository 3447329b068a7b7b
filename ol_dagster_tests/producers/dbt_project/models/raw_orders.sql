select * from (values (1, 'ann', 10.50), (2, 'bob', 20.00), (3, 'ann', 7.25))
    as t(order_id, customer, order_amount)
