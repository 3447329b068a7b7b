select order_id, customer, order_amount from {{ ref('raw_orders') }}
