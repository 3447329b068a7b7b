select customer, sum(order_amount) as total_amount, count(order_id) as orders
from {{ ref('stg_orders') }}
group by customer
